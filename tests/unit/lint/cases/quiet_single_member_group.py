"""A group of rank 0 alone (`new_group([0])`) used under `if rank == 0:`: its only member is the branch's rank."""
import torch
import torch.distributed as dist


def rank0_local_sync(t: torch.Tensor) -> None:
    solo = dist.new_group([0])
    if dist.get_rank() == 0:
        dist.all_reduce(t, group=solo)
    if dist.is_initialized():
        dist.barrier()
