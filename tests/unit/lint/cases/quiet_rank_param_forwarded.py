"""DeepSpeed's reduce: a parameter named `rank` is the reduce's destination, passed down from callers
that give None (an all-reduce) or one destination for every rank; it is not this process's rank."""
import torch.distributed as dist


def reduce_bucket(tensor, rank=None):
    if rank is None:
        dist.all_reduce(tensor)
    else:
        dist.reduce(tensor, rank)


def reduce_copy(tensor, rank=None):
    reduce_bucket(tensor, rank=rank)


def step(tensor):
    reduce_copy(tensor, rank=None)
