"""The twin of rank_early_return: every rank meets at the barrier before the other ranks return."""
import torch
import torch.distributed as dist


def export(model: torch.nn.Module, path: str) -> None:
    dist.barrier()
    if dist.get_rank() != 0:
        return
    torch.save(model.state_dict(), path)
