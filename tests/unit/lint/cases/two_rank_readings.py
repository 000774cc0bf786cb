"""DeepSpeed's engine compares the optimizer group's rank with the data-parallel rank, the same rank
read twice when the groups are one: lint cannot tell whether they are, so a warning."""
# expect: severity warning
import torch.distributed as dist

_DP_GROUP = None


def data_parallel_rank():
    return dist.get_rank(group=_DP_GROUP)


class Engine:
    def __init__(self, group):
        self.group = group
        self.save_zero = dist.get_rank(group=self.group) == data_parallel_rank()

    def save(self):
        if self.save_zero:  # expect: branch a
            dist.barrier(group=self.group)  # expect: call a
