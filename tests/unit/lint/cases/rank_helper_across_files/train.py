"""A rank test imported from another file (`from utils import is_main_process`) guards a barrier."""
import torch
import torch.distributed as dist

from utils import is_main_process


def save(model: torch.nn.Module, path: str) -> None:
    if is_main_process():  # expect: branch a
        torch.save(model.state_dict(), path)
        dist.barrier()  # expect: call a
