"""Rank 0 alone evaluating an FSDP model through a helper: the helper's forward all-gathers parameters."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


@torch.no_grad()
def evaluate(model, loader) -> float:
    total = 0.0
    for x, y in loader:
        total += torch.nn.functional.cross_entropy(model(x), y).item()  # expect: chain a
    return total


def train(model, train_step, val_loader, epochs: int) -> None:
    model = FSDP(model)
    for epoch in range(epochs):
        train_step(model)
        if dist.get_rank() == 0:  # expect: branch a
            print(f"epoch {epoch}: val {evaluate(model, val_loader):.3f}")  # expect: call a
