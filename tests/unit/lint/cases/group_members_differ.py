"""A group with more members than the branch's ranks: rank 2 is in `g` but never enters the all_reduce."""
import torch
import torch.distributed as dist


def pair_reduce(t: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    g = dist.new_group([0, 1, 2])
    if rank in [0, 1]:  # expect: branch a
        dist.all_reduce(t, group=g)  # expect: call a
    return t
