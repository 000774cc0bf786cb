"""A pipeline sends the gradients of its buffers, skipping those that are not floating point: the
dtype of this rank's part of a tensor is the whole tensor's, the same on every rank."""
import torch.distributed as dist


def send_grads(buffers, group):
    rank = dist.get_rank(group)
    parts = [b.chunk(dist.get_world_size(group))[rank] for b in buffers]
    for part in parts:
        if not part.is_floating_point():
            continue
        dist.broadcast(part, 0, group=group)
