"""Each rank holds a different number of micro-batches (rank + 2); the ranks agree on the largest
count with an all_reduce(MAX) and all loop that many times, a rank past its own data reducing a
zero gradient.

shape: b (made uniform by a collective) — `n = torch.tensor(local_count); dist.all_reduce(n,
op=MAX); for _ in range(int(n)): dist.all_reduce(grad)`: the loop's count comes from per-rank
data but the all_reduce(MAX) makes it the same on every rank.
truth: correct — every rank issues int(n) all_reduces. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    micro_batches = [torch.randn(4, 8) for _ in range(rank + 2)]  # this rank's own data
    n = torch.tensor(len(micro_batches))
    dist.all_reduce(n, op=dist.ReduceOp.MAX)
    total = torch.zeros(8)
    for i in range(int(n)):
        grad = micro_batches[i].mean(0) if i < len(micro_batches) else torch.zeros(8)
        dist.all_reduce(grad)
        total += grad
    print(f"rank {rank}: {int(n)} steps, |total| {total.norm():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
