"""Plain torch.distributed: SGD on a Linear(8, 4) with gradients averaged by hand, and running
statistics (loss, steps) that rank 0 averages across ranks for its log line.

shape: rank-dependent branch around a collective — `if rank == 0: dist.all_reduce(running)`.
truth: buggy — rank 0 issues an all_reduce of 3 floats after each step's gradient all_reduces;
rank 1 goes on to the next step's weight gradient (32 floats): the collectives mismatch.
expected lint target: bug_rank0_all_reduce.py:32 (the call, marker @bug) under the condition at line
31 (marker @cond).
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
    running = torch.zeros(3)
    for step in range(3):
        loss = model(torch.randn(16, 8)).square().mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        running += torch.tensor([loss.item(), 1.0, float(step)])
        if rank == 0:  # @cond
            dist.all_reduce(running)  # @bug
            print(f"step {step}: mean loss {running[0] / running[1]:.4f}")
        model.zero_grad()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
