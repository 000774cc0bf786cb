"""A method of the same class (`self._sync()`) that issues the collective, called under a rank branch."""
import torch
import torch.distributed as dist


class MetricTracker:
    def __init__(self):
        self.total = torch.zeros(1, device="cuda")

    def update(self, value: float) -> None:
        self.total += value

    def _sync(self) -> None:
        dist.all_reduce(self.total)  # expect: chain a

    def report(self) -> float:
        if dist.get_rank() == 0:  # expect: branch a
            self._sync()  # expect: call a
        return self.total.item()
