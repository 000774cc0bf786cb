"""A rank test kept on `self` under a name of the program's own (`self.is_master = dist.get_rank() == 0`)."""
import torch
import torch.distributed as dist


class Runner:
    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.is_master = dist.get_rank() == 0

    def save(self, path: str) -> None:
        if self.is_master:  # expect: branch a
            torch.save(self.model.state_dict(), path)
            dist.barrier()  # expect: call a
