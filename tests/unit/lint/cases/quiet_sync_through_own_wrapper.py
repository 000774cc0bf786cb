"""accelerate's idiom: the program's own wrapper broadcasts a list in place from rank 0, so after the
call every rank holds rank 0's list, whatever it held before, and a branch on it is uniform."""
import torch.distributed as dist


def broadcast_list(object_list, from_process=0):
    dist.broadcast_object_list(object_list, src=from_process)
    return object_list


def next_batch(batch):
    info = [None, False]
    if dist.get_rank() == 0:
        info = [batch, True]
    broadcast_list(info)
    stop = info[1]
    if stop:
        dist.barrier()
