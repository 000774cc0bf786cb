"""The rank kept on `self` in `__init__` (`self.rank = dist.get_rank()`) and tested in another method."""
import torch
import torch.distributed as dist


class Trainer:
    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()

    def checkpoint(self, path: str) -> None:
        if self.rank == 0:  # expect: branch a
            torch.save(self.model.state_dict(), path)
            dist.barrier()  # expect: call a

    def log(self, loss: torch.Tensor) -> None:
        if self.world_size > 1:
            dist.all_reduce(loss)
