"""A loop over what a function lint cannot read (an installed helper not in its tables) returns when
given the rank: its items differ per rank, but whether their number does is not known (a warning)."""
# expect: severity warning
import torch.distributed as dist
from somelib import make_cases


def run_cases():
    rank = dist.get_rank()
    cases = make_cases(rank, dist.get_world_size())
    for tensor in cases:  # expect: branch a
        dist.all_reduce(tensor)  # expect: call a
