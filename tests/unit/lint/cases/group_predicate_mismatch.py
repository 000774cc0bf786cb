"""Groups made by a predicate on the rank (`[r for r in range(world) if r % 2 == parity]`), but the
branch around the collective tests another one (`rank % 4 == parity`): ranks 2 and 3 never join
their group's all-reduce. The same predicate would be quiet (each rank enters its own group's)."""
import torch
import torch.distributed as dist


def main():
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = [dist.new_group([r for r in range(world) if r % 2 == parity]) for parity in range(2)]
    t = torch.ones(4)
    for parity, group in enumerate(groups):
        if rank % 4 == parity:  # expect: branch a
            dist.all_reduce(t, group=group)  # expect: call a
    for parity, group in enumerate(groups):
        if rank % 2 == parity:
            dist.all_reduce(t, group=group)
