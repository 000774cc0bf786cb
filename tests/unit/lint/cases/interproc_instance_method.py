"""A method of the program's own class called on an instance (`meter.sync()`) under a rank branch."""
import torch
import torch.distributed as dist


class AverageMeter:
    def __init__(self):
        self.sum = torch.zeros(1, device="cuda")
        self.count = torch.zeros(1, device="cuda")

    def update(self, value: torch.Tensor, n: int = 1) -> None:
        self.sum += value * n
        self.count += n

    def sync(self) -> float:
        dist.all_reduce(self.sum)  # expect: chain a
        dist.all_reduce(self.count)
        return (self.sum / self.count).item()


def validate(losses: list) -> None:
    meter = AverageMeter()
    for loss in losses:
        meter.update(loss)
    if dist.get_rank() == 0:  # expect: branch a
        print(f"val loss {meter.sync():.4f}")  # expect: call a
