"""The group's members named once (`ranks = [0, 1]`), for `new_group(ranks)` and for the branch `if rank in ranks:`."""
import torch
import torch.distributed as dist


def pair_reduce(t: torch.Tensor) -> torch.Tensor:
    rank = dist.get_rank()
    ranks = [0, 1]
    g = dist.new_group(ranks)
    if rank in ranks:
        dist.all_reduce(t, group=g)
    return t
