"""The local rank used for device placement and a None check on the loss are not per-rank decisions."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, loader, optimizer):
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device(f"cuda:{local_rank}")
    model = DDP(model.to(device), device_ids=[local_rank])
    for step in range(100):
        batch = next(loader)
        x = batch.to(local_rank)
        loss = model(x)
        if loss is None:
            raise RuntimeError("the model returned no loss")
        loss.backward()
        optimizer.step()
    dist.barrier()
