"""Rooted collectives whose root each rank takes from its own rank: every rank thinks it is the
root (`src=rank`), or a root computed from the rank on the default group."""
import torch
import torch.distributed as dist


def sync(t: torch.Tensor) -> None:
    rank = dist.get_rank()
    dist.broadcast(t, src=rank)  # expect: call a  # expect: branch a
    dist.reduce(t, rank % 2)  # expect: call b  # expect: branch b
    objs = [None]
    dist.broadcast_object_list(objs, src=0)  # the same root everywhere
    dist.send(t, dst=(rank + 1) % dist.get_world_size())  # a peer, per rank by design
