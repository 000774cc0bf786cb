"""Plain torch.distributed: a training loop that skips a step when its own loss is not finite,
before the gradient all_reduce, without telling the other ranks (rank 1's loss is NaN at step 1).

shape: a condition on this rank's own data around collectives — `if not
torch.isfinite(loss): continue` then `dist.all_reduce(p.grad)`.
truth: buggy — rank 1 skips step 1's two all_reduces: from there it is a step behind, and its
final barrier meets rank 0's last gradient all_reduce.
expected lint target: bug_nonfinite_continue.py:34 (the call, marker @bug) after the `continue`
under the condition at line 30 (marker @cond).
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
    model = torch.nn.Linear(8, 4)
    for step in range(3):
        x = torch.randn(16, 8)
        if rank == 1 and step == 1:
            x[0, 0] = float("nan")  # a bad sample on one rank
        loss = model(x).square().mean()
        if not torch.isfinite(loss):  # @cond
            continue
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)  # @bug
        model.zero_grad()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
