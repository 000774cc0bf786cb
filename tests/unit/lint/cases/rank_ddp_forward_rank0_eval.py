"""Rank 0 alone runs a DDP model's forward (an evaluation): DDP broadcasts its buffers in forward."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model: torch.nn.Module, batches) -> None:
    model = DDP(torch.nn.Sequential(model, torch.nn.BatchNorm1d(8)))
    for x in batches:
        model(x).sum().backward()
    if dist.get_rank() == 0:  # expect: branch a
        print(model(torch.randn(4, 8)).mean())  # expect: call a
