"""A training script that uses the user's own statistics package (statskit/): rank 0 prints a
summary of the losses with statskit.summarize, which, two calls down (summary.summarize ->
collect.global_values -> dist.all_gather), gathers every rank's values.

shape: a helper package's function that reaches a collective a few calls deep, called under
`if rank == 0` — `if rank == 0: print(summarize(losses))`.
truth: buggy — rank 0's all_gather meets rank 1's final barrier.
expected lint target: main.py:27 (the call, marker @bug) under the condition at line 26 (marker
@cond); the chain goes through statskit/summary.py and statskit/collect.py.
"""
import datetime
import os

import torch
import torch.distributed as dist
from statskit import summarize

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(rank)
    losses = torch.rand(6)
    if rank == 0:  # @cond
        print(summarize(losses))  # @bug
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
