"""The same `not from_rank0 or rank == 0` change, used where `from_rank0` is set: there only rank 0
changed the dict, and the loop over it runs a different number of times per rank."""
# expect: severity error
import torch.distributed as dist


def load(sd, fqns, from_rank0):
    for fqn in fqns:
        if not from_rank0 or dist.get_rank() == 0:
            sd[fqn + ".extra"] = sd[fqn]
    if from_rank0:
        for key in sd:  # expect: branch a
            dist.all_reduce(sd[key])  # expect: call a
