"""Bug: metrics are all-reduced by iterating a dict whose insertion order depends on the rank.

Rank 0 adds the confusion matrix first (it also prints it), the other rank adds the loss
first, so the two all_reduces of different shapes (3x3 and 1) are issued in swapped order.
The fix is to iterate in a fixed order (sorted keys) or to pack everything into one tensor.
"""
import datetime
import time
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    metrics = {}
    if rank == 0:
        metrics["confusion"] = torch.randint(0, 5, (3, 3)).float()  # computed first for the log
        time.sleep(0.5)  # rendering the matrix for the log is slow: rank 1 launches both reductions first
    metrics["loss"] = torch.rand(1)
    metrics.setdefault("confusion", torch.randint(0, 5, (3, 3)).float())
    works = []
    for name, value in metrics.items():  # launch all reductions, then wait
        works.append(dist.all_reduce(value, async_op=True))  # collcheck: culprit
    for work in works:
        work.wait()
    print(f"rank {rank}: reduced {list(metrics)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
