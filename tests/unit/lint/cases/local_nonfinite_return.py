"""An early `return` on a non-finite local tensor (`if not torch.isfinite(loss).all()`) skips the all-reduce after it."""
# expect: kind local
import torch
import torch.distributed as dist


def average_loss(loss: torch.Tensor, world_size: int) -> torch.Tensor:
    if not torch.isfinite(loss).all():  # expect: branch a
        return loss
    dist.all_reduce(loss, op=dist.ReduceOp.SUM)  # expect: call a
    return loss / world_size
