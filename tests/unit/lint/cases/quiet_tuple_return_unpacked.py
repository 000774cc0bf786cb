"""A helper returns (members, group, rank); unpacking it keeps each item's own value: the group handle
is the same on every rank, only the third item is the rank, so `if group is not None:` is no rank test."""
import torch.distributed as dist


def init():
    group = dist.new_group([0, 1])
    rank = dist.get_rank()
    return [0, 1], group, rank


def run(tensor):
    _, group, _ = init()
    if group is not None:
        dist.all_reduce(tensor, group=group)
