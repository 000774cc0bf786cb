"""Roots that are the same on every rank: constants, a uniform parameter, a value every rank got
from a broadcast; and a point-to-point peer, per rank by design."""
import torch
import torch.distributed as dist


def share(t: torch.Tensor, root: int = 0) -> None:
    dist.broadcast(t, src=root)
    dist.reduce(t, dst=0)
    chosen = torch.tensor([dist.get_rank()])
    dist.broadcast(chosen, src=0)  # every rank now holds rank 0's value
    dist.broadcast(t, src=int(chosen))
    gathered = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
    dist.gather_object("x", gathered, dst=0)


def main():
    dist.init_process_group("gloo")
    share(torch.ones(2), root=0)
    rank = dist.get_rank()
    dist.send(torch.ones(1), dst=(rank + 1) % 2) if rank % 2 == 0 else dist.recv(torch.ones(1), src=rank - 1)
