"""DDP on 2 gloo ranks, CPU: 4 SGD steps of a Linear(8, 1); after every odd step each rank
validates on its own shard under torch.no_grad(), and the logging rank, chosen once at start-up
(`is_logger = rank == world - 1`, the rank that hosts the dashboard), prints the loss.

bug: the validation loss is averaged across ranks inside `if is_logger:`, within the `with
torch.no_grad():` block of the `for` loop. DDP's world group: 3 set-up collectives (slots 0-2:
the parameter shape check's all-gather and broadcast, the module state's broadcast), step 0's
gradient all-reduce (slot 3), step 1's 2 bucket-rebuild broadcasts and gradient all-reduce
(slots 4-6). Rank 1 is the logger: after step 1 it issues the validation loss's all_reduce (one
float) at slot 7, an extra collective, while rank 0 goes on to step 2's backward, whose gradient
all-reduce (9 floats) is its slot 7 (gloo: a mismatch or the group timeout).

ok: every rank averages the loss; the logger prints it.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def shard(rank: int, n: int, seed: int):
    g = torch.Generator().manual_seed(seed + rank)
    return torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    is_logger = rank == world - 1  # the rank that hosts the dashboard
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = shard(rank, 32, 0)
    xv, yv = shard(rank, 16, 100)
    for step in range(4):
        loss = torch.nn.functional.mse_loss(model(x[step * 8:(step + 1) * 8]), y[step * 8:(step + 1) * 8])
        loss.backward()  # @backward
        opt.step()
        opt.zero_grad()
        if step % 2 == 0:
            continue
        with torch.no_grad():
            val_loss = torch.nn.functional.mse_loss(model.module(xv), yv)
            if case == "ok":
                dist.all_reduce(val_loss)
                val_loss /= world
                if is_logger:
                    print(f"step {step}: validation loss {val_loss.item():.4f}")
            elif is_logger:  # @cond
                dist.all_reduce(val_loss)  # @val_reduce
                print(f"step {step}: validation loss {val_loss.item() / world:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
