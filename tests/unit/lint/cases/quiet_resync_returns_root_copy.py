"""FSDP's re-sync: rank 0 broadcasts its state and returns its own copy, the others the copy they
received; a loop over the returned state's keys runs alike on every rank, though the state passed in
was empty on the others."""
import torch.distributed as dist


def resync(state, group):
    objects = [None]
    if dist.get_rank(group) == 0:
        objects[0] = state
    dist.broadcast_object_list(objects, src=0, group=group)
    if dist.get_rank(group) == 0:
        return state
    return objects[0]


def load(osd, group):
    if dist.get_rank(group) > 0:
        osd = {}
    osd = resync(osd, group)
    for key in osd["state"]:
        dist.all_reduce(osd["state"][key], group=group)
