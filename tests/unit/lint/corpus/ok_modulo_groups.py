"""Even and odd ranks each average a tensor within their own parity group (`rank % 2`), the
groups made on every rank in one list comprehension (2 gloo ranks: groups [0] and [1]).

shape: a (group members, arithmetic) — `for parity, group in enumerate(groups): if rank % 2 ==
parity: dist.all_reduce(t, group=group)`: each rank enters the branch of the group it belongs to.
truth: correct — each group's members (and only they) issue its all_reduce. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = [dist.new_group([r for r in range(world) if r % 2 == parity]) for parity in range(2)]
    t = torch.full((4,), float(rank))
    for parity, group in enumerate(groups):
        if rank % 2 == parity:
            dist.all_reduce(t, group=group)
    dist.barrier()
    print(f"rank {rank}: {t.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
