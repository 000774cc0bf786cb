"""Thousands of small collectives, their results printed per rank: recorded onto a file system that
fills mid-run (tests/integration/test_write_errors.py), the output must be an unrecorded run's.
argv[1]: how many all_reduce steps."""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def show(name, value):
    os.write(1, f"{dist.get_rank()} {name}: {value}\n".encode())  # one write: lines of ranks never mix


def main():
    steps = int(sys.argv[1])
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    total = torch.zeros(3, dtype=torch.float64)
    for i in range(steps):
        x = torch.full((3,), float(rank * 1000 + i), dtype=torch.float64)
        dist.all_reduce(x)  # @step
        total += x
        if i % 1000 == 999:
            show(f"after {i + 1}", total.tolist())
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank, "total": total.tolist()})
    show("all_gather_object", objs)
    b = torch.arange(4) * (rank + 1)
    dist.broadcast(b, src=1)
    show("broadcast", b.tolist())
    dist.barrier()
    show("done", steps)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
