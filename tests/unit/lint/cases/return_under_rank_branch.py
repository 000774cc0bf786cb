"""A helper whose returns sit under a rank test returns a rank test, though each returned expression is
a constant: a branch on its result is a rank branch."""
# expect: severity error
import torch.distributed as dist


def should_sync():
    if dist.get_rank() == 0:
        return True
    return False


def step(tensor):
    if should_sync():  # expect: branch a
        dist.all_reduce(tensor)  # expect: call a
