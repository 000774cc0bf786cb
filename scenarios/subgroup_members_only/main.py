"""Valid: every rank creates both subgroups {0,1} and {2,3}; each is then used only by its members.

This is the documented contract of new_group(): all ranks call it for every group, in
the same order; collectives on a group are issued by its members only.  Non-members get
GroupMember.NON_GROUP_MEMBER back and simply skip the group.
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    halves = [list(range(0, world // 2)), list(range(world // 2, world))]
    groups = [dist.new_group(ranks, timeout=timeout) for ranks in halves]  # all ranks, same order
    mine = groups[0] if rank in halves[0] else groups[1]
    t = torch.full((4,), float(rank))
    dist.all_reduce(t, group=mine)
    for step in range(2):
        dist.broadcast(t, src=halves[0][0] if rank in halves[0] else halves[1][0], group=mine)
    dist.barrier(group=mine)
    dist.all_reduce(t)  # one collective over the whole world
    print(f"rank {rank}: {t[0].item()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
