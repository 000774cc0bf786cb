"""DDP on 2 gloo ranks, CPU: up to 6 SGD steps of a zero-initialised Linear(8, 1), with early
stopping once the training loss is under a target (after a 2-step warm-up), then a summary
all_reduce of (steps, last loss).

bug: each rank tests its own batch's loss (`if step >= WARMUP and loss.item() < TARGET:
break`), never reduced across ranks. Rank 1's targets are 100 times smaller than rank 0's, so
its loss is under the target from the start: at step 2 it breaks out of the loop after the
forward and issues the summary all_reduce (2 floats), while rank 0 runs step 2's backward (DDP's
gradient all-reduce, 9 floats). World group: DDP's set-up (slots 0-2), step 0's gradient
all-reduce (3), step 1's bucket-rebuild broadcasts (4, 5) and gradient all-reduce (6): at slot 7
rank 1 is missing the gradient all-reduce it skipped (gloo: a mismatch or the group timeout).

ok: the ranks stop on the loss averaged across ranks (an all_reduce each step), together.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

TARGET, WARMUP, STEPS = 0.05, 2, 6


def shard(rank: int):
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(STEPS, 8, 8, generator=g)
    scale = 1.0 if rank == 0 else 0.01  # rank 1's shard: nearly zero targets
    return x, scale * torch.randn(STEPS, 8, 1, generator=g)


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    rank = dist.get_rank()
    layer = torch.nn.Linear(8, 1)
    torch.nn.init.zeros_(layer.weight)
    torch.nn.init.zeros_(layer.bias)
    model = DDP(layer)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    xs, ys = shard(rank)
    step, loss = 0, torch.zeros(())
    for step in range(STEPS):
        loss = torch.nn.functional.mse_loss(model(xs[step]), ys[step])
        print(f"rank {rank} step {step}: loss {loss.item():.5f}")
        if case == "ok":
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            if step >= WARMUP and mean.item() / dist.get_world_size() < TARGET:
                break
        elif step >= WARMUP and loss.item() < TARGET:  # @cond
            break
        loss.backward()  # @backward
        opt.step()
        opt.zero_grad()
    summary = torch.tensor([float(step), loss.item()])
    dist.all_reduce(summary)  # @summary
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
