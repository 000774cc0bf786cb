"""Rank 0 decides, then broadcasts the decision: after the broadcast the value is the same on every rank."""
import torch
import torch.distributed as dist


def maybe_stop(val_loss: float, best: float) -> bool:
    rank = dist.get_rank()
    decision = [val_loss > best] if rank == 0 else [None]
    dist.broadcast_object_list(decision, src=0)
    if decision[0]:
        dist.barrier()
        return True
    flag = torch.tensor(float(val_loss > best) if rank == 0 else 0.0, device="cuda")
    dist.broadcast(flag, src=0)
    if flag.item() > 0:
        dist.barrier()
    return False
