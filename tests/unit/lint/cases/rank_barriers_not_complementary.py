"""Two barriers under rank conditions that do not cover every rank once: ranks 2 and up reach neither."""
import torch.distributed as dist


def sync(rank: int) -> None:
    if rank == 0:  # expect: branch a
        dist.barrier()  # expect: call a
    if rank == 1:  # expect: branch b
        dist.barrier()  # expect: call b
