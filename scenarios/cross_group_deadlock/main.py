"""Bug: 4 ranks on a ring of pair groups {0,1},{1,2},{2,3},{3,0}; every rank syncs with its
right-hand neighbour's group first, so each waits for a peer that is busy in another group.

Rank r waits in group {r, r+1} for rank r+1, which is waiting in {r+1, r+2}: a cycle
0 -> 1 -> 2 -> 3 -> 0, and no collective can complete.  Each collective on its own
is well formed (right group, members only); only the order across groups is wrong.
The fix is a globally consistent order, e.g. always the group with the lower index first.
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    pairs = [[i, (i + 1) % world] for i in range(world)]
    groups = [dist.new_group(sorted(p), timeout=timeout) for p in pairs]  # every rank creates every group
    right = groups[rank]                  # {rank, rank + 1}
    left = groups[(rank - 1) % world]     # {rank - 1, rank}
    halo = torch.full((4,), float(rank))
    for group in (right, left):  # right-hand neighbour first, on every rank: a cycle
        dist.all_reduce(halo, group=group)  # collcheck: culprit
    print(f"rank {rank}: halo {halo[0].item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
