"""DDP on 2 gloo ranks, CPU, without a DistributedSampler: each rank loads its own shard file
(here: made in memory, 13 samples on rank 0 and 12 on rank 1) into a DataLoader of batch 4, so
rank 0 has 4 batches and rank 1 has 3, and nothing joins the uneven inputs.

shape: a per-rank loop count (a loader built from the rank) — `for x, y in loader:
ddp(x)...backward()`.
truth: buggy — rank 0's 4th backward all_reduces gradients while rank 1 is at the barrier after
the loop.
expected lint target: bug_ddp_uneven_shards.py:37 (the call, marker @bug) in the loop at line 35
(marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def shard(rank: int) -> torch.utils.data.TensorDataset:
    n = 13 if rank == 0 else 12
    g = torch.Generator().manual_seed(rank)
    return torch.utils.data.TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(0)
    ddp = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(shard(rank), batch_size=4)
    for x, y in loader:  # @cond
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # @bug
        opt.step()
        opt.zero_grad()
    dist.barrier()
    print(f"rank {rank}: trained {len(loader)} batches")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
