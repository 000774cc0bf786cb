"""torchmetrics on 2 gloo ranks: each rank updates a MeanSquaredError with its own predictions,
every rank calls compute() (which all-gathers the metric's states), and rank 0 alone prints it.

shape: c (a library call that issues collectives, called on every rank) — `value =
metric.compute()` outside the condition, `if rank == 0: print(value)`.
truth: correct — both ranks sync the metric. Exits 0.
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
        preds, target = torch.randn(8, generator=g), torch.randn(8, generator=g)
        metric.update(preds, target)
    value = metric.compute()
    if rank == 0:
        print(f"rank 0: mse over both ranks {value.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
