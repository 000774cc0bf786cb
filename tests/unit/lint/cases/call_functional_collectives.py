"""Functional collectives (`torch.distributed._functional_collectives`) issue collectives too."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def reduce_metric(t: torch.Tensor, group) -> torch.Tensor:
    if dist.get_rank() == 0:  # expect: branch a
        t = funcol.all_reduce(t, "sum", group)  # expect: call a
    return t
