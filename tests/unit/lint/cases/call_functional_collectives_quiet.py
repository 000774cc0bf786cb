"""The twin of call_functional_collectives: every rank reduces, rank 0 only prints the result."""
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol


def reduce_metric(t: torch.Tensor, group) -> torch.Tensor:
    t = funcol.all_reduce(t, "sum", group)
    if dist.get_rank() == 0:
        print(t.item())
    return t
