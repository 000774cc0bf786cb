"""ZeroRedundancyOptimizer.consolidate_state_dict: ranks take turns as the broadcast's root; nested
tests on the rank, the turn and the target split the work so that every rank broadcasts from `r`
exactly when `r != to` (the target keeps its own state, and nobody broadcasts on its turn)."""
import torch.distributed as dist


def consolidate(state, to, world_size):
    me = dist.get_rank()
    gathered = []
    for r in range(world_size):
        if me == to:
            if r == me:
                gathered.append(state)
            else:
                gathered.append(dist.broadcast(state, src=r))
        else:
            if r == me:
                dist.broadcast(state, src=me)
            elif r != to:
                dist.broadcast(state, src=r)
    return gathered
