"""Loops with the same trip count on every rank: over the model's parameters and over `range(num_steps)`."""
import torch
import torch.distributed as dist


def average_gradients(model: torch.nn.Module) -> None:
    world_size = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= world_size


def train(model: torch.nn.Module, optimizer, num_steps: int) -> None:
    for step in range(num_steps):
        loss = model(torch.randn(8, 16, device="cuda")).sum()
        loss.backward()
        average_gradients(model)
        optimizer.step()
        dist.barrier()
