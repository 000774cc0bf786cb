"""Other spellings of the import: `from torch import distributed as dist` and `import torch.distributed as tdist`."""
import torch
import torch.distributed as tdist
from torch import distributed as dist


def sync_a(t: torch.Tensor) -> None:
    if dist.get_rank() == 0:  # expect: branch a
        dist.all_reduce(t)  # expect: call a


def sync_b(t: torch.Tensor) -> None:
    if tdist.get_rank() == 0:  # expect: branch b
        tdist.broadcast(t, src=0)  # expect: call b
