"""Plain torch.distributed on 2 gloo ranks: SGD on a Linear(8, 4) whose gradients are averaged by
hand (an all_reduce of the weight's 32 floats, then of the bias' 4, every step), and a logging
helper two calls deep (main -> train -> log_progress -> reduce_stats) every odd step.

bug: reduce_stats averages the step's statistics (3 floats) only where `dist.get_rank() ==
dist.get_world_size() - 1` (the rank that held the loss when this was a pipeline). Rank 1 takes
the branch: after step 1 (world group slots 0-3: two gradient all-reduces per step) it issues
the statistics all_reduce at slot 4, an extra collective, while rank 0 goes on to step 2's
weight-gradient all_reduce at slot 4 (32 floats against 3: gloo aborts or the group times out).

ok: every rank reduces the statistics.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def reduce_stats(stats: torch.Tensor, case: str) -> torch.Tensor:
    if case == "ok":
        dist.all_reduce(stats)
        return stats / dist.get_world_size()
    if dist.get_rank() == dist.get_world_size() - 1:  # @cond
        dist.all_reduce(stats)  # @stats
        stats /= dist.get_world_size()
    return stats


def log_progress(step: int, loss: torch.Tensor, model: torch.nn.Module, case: str) -> None:
    norm = torch.stack([p.detach().norm() for p in model.parameters()]).norm()
    stats = reduce_stats(torch.stack([loss.detach(), norm, torch.tensor(float(step))]), case)
    print(f"rank {dist.get_rank()} step {step}: loss {stats[0]:.4f} norm {stats[1]:.4f}")


def train(model: torch.nn.Module, case: str, steps: int = 4) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(dist.get_rank())
    for step in range(steps):
        x, y = torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)  # @grads
            p.grad /= dist.get_world_size()
        opt.step()
        opt.zero_grad()
        if step % 2 == 1:
            log_progress(step, loss, model, case)


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    torch.manual_seed(0)
    train(torch.nn.Linear(8, 4), case)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
