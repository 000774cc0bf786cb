"""DDP on 2 gloo ranks, CPU: three training steps, then rank 0 alone evaluates the underlying
module (`ddp.module`, no DDP forward: no buffer broadcast, no hook) on a validation batch, and
every rank waits at a barrier outside the branch.

shape: c (a call that issues collectives in some configurations) — the DDP wrapper's forward may
broadcast buffers, its `.module`'s forward never does: `if rank == 0: ddp.module(x)`.
truth: correct — nothing collective under the branch. Exits 0.
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
    ddp = DDP(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1)))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    for step in range(3):
        ddp(torch.randn(4, 8)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    if rank == 0:
        ddp.eval()
        with torch.no_grad():
            val = ddp.module(torch.randn(16, 8)).square().mean()
        print(f"rank 0: validation {val.item():.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
