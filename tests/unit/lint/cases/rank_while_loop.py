"""A `while` loop whose condition depends on the rank: ranks run different numbers of all-reduces."""
import torch
import torch.distributed as dist


def warmup(t: torch.Tensor, base_steps: int) -> None:
    steps = base_steps + dist.get_rank()
    done = 0
    while done < steps:  # expect: branch a
        dist.all_reduce(t)  # expect: call a
        done += 1
