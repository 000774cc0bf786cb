"""The non-finite test wrapped in a helper (`def is_bad(loss): return not torch.isfinite(loss).all()`)."""
# expect: kind local
import torch
import torch.distributed as dist


def is_bad(loss: torch.Tensor) -> bool:
    return not bool(torch.isfinite(loss).all())


def reduce_loss(loss: torch.Tensor) -> torch.Tensor:
    if is_bad(loss):  # expect: branch a
        return torch.zeros_like(loss)
    dist.all_reduce(loss)  # expect: call a
    return loss / dist.get_world_size()
