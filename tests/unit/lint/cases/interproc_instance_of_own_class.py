"""A method of the program's own class, called on an instance (and through an annotated parameter)."""
import torch
import torch.distributed as dist


class Evaluator:
    def evaluate(self, t: torch.Tensor) -> torch.Tensor:
        dist.all_reduce(t)  # expect: chain a
        return t


def run(t: torch.Tensor) -> None:
    ev = Evaluator()
    if dist.get_rank() == 0:  # expect: branch a
        ev.evaluate(t)  # expect: call a


def run_annotated(ev: Evaluator, t: torch.Tensor) -> None:
    if dist.get_rank() == 0:  # expect: branch b
        ev.evaluate(t)  # expect: call b
