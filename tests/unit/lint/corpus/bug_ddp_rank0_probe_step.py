"""DDP on 2 gloo ranks, CPU: before training, rank 0 alone runs a "probe" step on a fixed batch to
check that the loss goes down (its backward is DDP's: the gradient all_reduce runs in the hooks).

shape: rank-dependent branch around a framework call that issues collectives — `if rank == 0:
ddp(probe).square().mean().backward()`.
truth: buggy — rank 0's probe backward all_reduces gradients that rank 1 never does: rank 0's
first training step then waits for a bucket rank 1 has already reduced.
expected lint target: bug_ddp_rank0_probe_step.py:29 (the call, marker @bug) under the condition at
line 28 (marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(0)
    ddp = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    probe = torch.randn(16, 8)
    if rank == 0:  # @cond
        ddp(probe).square().mean().backward()  # @bug
        opt.zero_grad()
    for step in range(3):
        ddp(torch.randn(4, 8)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    dist.barrier()
    print(f"rank {rank}: trained")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
