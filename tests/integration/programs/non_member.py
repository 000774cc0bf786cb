"""Rank 1 all-reduces on a group it is not in (the wrong entry of a list of subgroups): torch
skips the call with a warning, and rank 0 waits in the group {0, 1} until the timeout."""
import datetime

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    rank = dist.get_rank()
    groups = [dist.new_group([0, 1]), dist.new_group([2])]  # every rank creates both
    mine = groups[1] if rank in (1, 2) else groups[0]  # bug: rank 1 belongs to groups[0]
    t = torch.ones(3)
    dist.all_reduce(t, group=mine)  # @skipped
    dist.barrier()


if __name__ == "__main__":
    main()
