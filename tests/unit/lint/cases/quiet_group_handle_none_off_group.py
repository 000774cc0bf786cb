"""torch's own test idiom: a helper hands the ranks outside a group None instead of its handle, and the
caller issues the group's collectives only `if group is not None:`, exactly the group's members."""
import torch.distributed as dist


def init_group_test():
    members = [1, 2]
    group = dist.new_group(members)
    rank = dist.get_rank()
    if rank not in members:
        return [], None, rank
    return members, group, rank


def barrier_on(group):
    dist.barrier(group)


def test_barrier_group():
    _, group, _ = init_group_test()
    if group is not None:
        barrier_on(group)
