"""Rank 2 sends one message to rank 1, then leaves without the all_reduce that ranks 0 and 1
issue: ranks 0 and 1 wait on rank 2 in it, whatever P2P traffic came before."""
import datetime

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
    rank = dist.get_rank()
    t = torch.ones(2)
    if rank == 2:
        dist.send(t, dst=1)
        return  # bug: skips the all_reduce below
    if rank == 1:
        dist.recv(t, src=2)
    dist.all_reduce(t)  # @all_reduce


if __name__ == "__main__":
    main()
