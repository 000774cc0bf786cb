"""An early exit on the rank (`if rank != 0: return`) leaves the barrier after it to rank 0 alone."""
import torch
import torch.distributed as dist


def export(model: torch.nn.Module, path: str) -> None:
    if dist.get_rank() != 0:  # expect: branch a
        return
    torch.save(model.state_dict(), path)
    dist.barrier()  # expect: call a
