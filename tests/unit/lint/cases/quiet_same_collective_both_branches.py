"""Both branches of a rank test issue the same collective, so every rank issues it."""
import torch
import torch.distributed as dist


def share_config(t: torch.Tensor, path: str) -> torch.Tensor:
    if dist.get_rank() == 0:
        t.copy_(torch.load(path))
        dist.broadcast(t, 0)
    else:
        dist.broadcast(t, 0)
    return t
