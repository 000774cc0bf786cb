"""A training loop that skips a step when any rank's loss is not finite: the local flag is
all_reduced first, and every rank tests the reduced flag's .item() (rank 1's loss is NaN at step 1).

shape: b (made uniform by a collective) — `bad = torch.tensor(float(not finite));
dist.all_reduce(bad); if bad.item(): continue` before the gradient all_reduce.
truth: correct — every rank skips the same steps. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    skipped = 0
    for step in range(3):
        x = torch.randn(8, 4)
        if rank == 1 and step == 1:
            x[0, 0] = float("nan")  # a bad sample on one rank
        loss = model(x).square().mean()
        bad = torch.tensor([float(not torch.isfinite(loss))])
        dist.all_reduce(bad)
        if bad.item():
            skipped += 1
            continue
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        model.zero_grad()
    assert skipped == 1
    print(f"rank {rank}: skipped {skipped} step(s)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
