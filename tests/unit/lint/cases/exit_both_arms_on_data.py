"""FSDP's _broadcast_state: both arms of the rank test may return early, each on a test of its own data,
which an earlier broadcast made correspond; lint cannot show that, so it warns rather than errs."""
# expect: severity warning
import torch
import torch.distributed as dist


class Info:
    pass


def broadcast_state(state, group):
    if dist.get_rank(group) == 0:  # expect: branch a
        if not isinstance(state, torch.Tensor) or state.dim() == 0:
            return state
        tensor = state
    else:
        if isinstance(state, torch.Tensor):
            return state
        elif not isinstance(state, Info):
            return state
        tensor = torch.zeros(state.shape)
    dist.broadcast(tensor, src=0, group=group)  # expect: call a
    return tensor
