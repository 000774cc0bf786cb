"""Ranks take turns, but only the turn's root broadcasts: the others never meet it."""
# expect: severity error
import torch.distributed as dist


def share(state, world_size):
    me = dist.get_rank()
    for r in range(world_size):
        if r == me:  # expect: branch a
            dist.broadcast(state, src=r)  # expect: call a
