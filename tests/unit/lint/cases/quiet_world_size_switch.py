"""`if world_size > 1:` is the same on every rank."""
import torch
import torch.distributed as dist


def average(t: torch.Tensor) -> torch.Tensor:
    world_size = dist.get_world_size() if dist.is_initialized() else 1
    if world_size > 1:
        dist.all_reduce(t)
        t /= world_size
    return t
