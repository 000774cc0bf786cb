"""Each torch.distributed collective under `if rank == 0:`: all_reduce, barrier, broadcast, all_gather_object, new_group, monitored_barrier."""
import datetime

import torch
import torch.distributed as dist


def rank_zero_everything(t: torch.Tensor, stats: dict) -> None:
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    if rank == 0:  # expect: branch all_reduce
        dist.all_reduce(t, op=dist.ReduceOp.SUM)  # expect: call all_reduce
    if rank == 0:  # expect: branch barrier
        dist.barrier()  # expect: call barrier
    if rank == 0:  # expect: branch broadcast
        dist.broadcast(t, src=0)  # expect: call broadcast
    if rank == 0:  # expect: branch gather_object
        everyone = [None] * world_size
        dist.all_gather_object(everyone, stats)  # expect: call gather_object
    if rank == 0:  # expect: branch new_group
        evens = dist.new_group(list(range(0, world_size, 2)))  # expect: call new_group
        print(evens)
    if rank == 0:  # expect: branch monitored
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))  # expect: call monitored
