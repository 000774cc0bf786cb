"""`if not from_rank0 or rank == 0:` changes the state dict on some ranks only when `from_rank0` is set;
it is used for a collective only in the `else` of `if from_rank0:`, where every rank changed it."""
import torch.distributed as dist
from torch.distributed.tensor import distribute_tensor


def distribute(full_sd, local_sd):
    for key, value in full_sd.items():
        local = local_sd.get(key)
        if local is None:
            continue
        local_sd[key] = distribute_tensor(value, local.device_mesh, local.placements)


def load(sd, local_sd, fqns, from_rank0):
    for fqn in fqns:
        if not from_rank0 or dist.get_rank() == 0:
            sd[fqn + ".renamed"] = sd.pop(fqn)
    if from_rank0:
        dist.broadcast_object_list([sd], src=0)
    else:
        distribute(sd, local_sd)
