"""torchmetrics on 2 gloo ranks: each rank updates a MeanSquaredError with its own predictions,
then rank 0 alone calls compute() to print it; compute() syncs the metric's states across ranks
(all_gather) before computing.

shape: a library call that issues collectives under `if rank == 0` — `if rank == 0:
print(metric.compute())`.
truth: buggy — rank 0's all_gather of the metric states meets rank 1's final barrier.
expected lint target: bug_torchmetrics_compute_rank0.py:29 (the call, marker @bug) under the
condition at line 28 (marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist
from torchmetrics.regression import MeanSquaredError

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    metric = MeanSquaredError()
    g = torch.Generator().manual_seed(rank)
    for _ in range(3):
        metric.update(torch.randn(8, generator=g), torch.randn(8, generator=g))
    if rank == 0:  # @cond
        print(f"rank 0: mse {metric.compute().item():.4f}")  # @bug
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
