"""ZeRO's checkpoints: each rank loads its own shard (a file named after it, an element of a list by its
rank); `is None` on what was read, and the scalars every shard saved alike, are not tests of the rank."""
import glob

import torch
import torch.distributed as dist


class Optimizer:
    def __init__(self, group, clip_grad=0.0):
        self.group = group
        self.clip_grad = clip_grad

    def load_state_dict(self, state_dict_list):
        current = state_dict_list[dist.get_rank(group=self.group)]
        self.clip_grad = current.get("clip_grad", self.clip_grad)

    def step(self, norm):
        if self.clip_grad > 0.0:
            dist.all_reduce(norm, group=self.group)


def load_checkpoint(load_dir):
    files = sorted(glob.glob(f"{load_dir}/zero_pp_rank_{dist.get_rank()}_model_states.pt"))
    checkpoint = torch.load(files[0])
    if checkpoint is None:
        return None
    dist.barrier()
    return checkpoint
