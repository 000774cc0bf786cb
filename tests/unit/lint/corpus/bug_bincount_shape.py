"""Plain torch.distributed: a class histogram summed across ranks, each rank's counts made with
torch.bincount of its own labels, whose length is this rank's largest label + 1 (5 on rank 0, 4
on rank 1).

shape: a per-rank argument (tensor shape from local data) — `counts = torch.bincount(labels)`;
`dist.all_reduce(counts)`: every rank issues the call, with a different number of elements.
truth: buggy — gloo's all_reduce of 5 against 4 elements fails (or, where it pairs, the program
compares the histograms across ranks and exits 3).
expected lint target: bug_bincount_shape.py:27 (the call, marker @bug); no condition: the per-rank
shape comes from line 26 (marker @origin).
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    labels = torch.tensor([0, 1, 2, 3, 4, 1]) if rank == 0 else torch.tensor([0, 3, 3, 2])
    counts = torch.bincount(labels)  # @origin
    dist.all_reduce(counts)  # @bug
    sizes = [None] * world
    dist.all_gather_object(sizes, counts.tolist())
    if any(s != sizes[0] for s in sizes):
        print(f"rank {rank}: histograms differ across ranks: {sizes}", file=sys.stderr)
        sys.exit(3)
    print(f"rank {rank}: {counts.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
