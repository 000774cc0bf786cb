"""A rank-derived flag: `is_master = rank == 0` and then `if is_master:`."""
import torch
import torch.distributed as dist


def train(model, optimizer, epochs: int):
    rank = dist.get_rank()
    is_master = rank == 0
    for epoch in range(epochs):
        optimizer.step()
        if is_master:  # expect: branch a
            print(f"epoch {epoch} done")
            dist.barrier()  # expect: call a
    torch.cuda.synchronize()
