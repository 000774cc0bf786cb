"""`if len(batch) < BATCH: break` on this rank's batch: a rank that stops early misses the barrier in the loop."""
# expect: kind local
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler

BATCH = 64


def evaluate(model, dataset):
    loader = DataLoader(dataset, batch_size=BATCH, sampler=DistributedSampler(dataset, shuffle=False))
    correct = 0
    for batch in loader:
        if len(batch) < BATCH:  # expect: branch a
            break
        with torch.no_grad():
            correct += (model(batch).argmax(-1) == 0).sum().item()
        dist.barrier()  # expect: call a
    return correct
