"""Megatron-style group creation: every rank creates every group; `if rank in ranks:` only keeps its own."""
import torch
import torch.distributed as dist


def init_data_parallel_groups(tensor_parallel: int) -> object:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    my_group = None
    for start in range(tensor_parallel):
        ranks = list(range(start, world_size, tensor_parallel))
        group = dist.new_group(ranks)
        if rank in ranks:
            my_group = group
    return my_group


def reduce_grads(model: torch.nn.Module, group) -> None:
    for p in model.parameters():
        dist.all_reduce(p.grad, group=group)
