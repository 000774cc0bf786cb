"""Rank 0 evaluates the unwrapped module (`model.module`): no collective, no finding."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model: torch.nn.Module, batches) -> None:
    model = DDP(model)
    for x in batches:
        model(x).sum().backward()
    if dist.get_rank() == 0:
        with torch.no_grad():
            print(model.module(torch.randn(4, 8)).mean())
