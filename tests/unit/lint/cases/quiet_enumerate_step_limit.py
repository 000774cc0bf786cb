"""`for i, batch in enumerate(loader): if i >= max_steps: break`: the step index is the same on every rank."""
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train(model, dataset, optimizer, local_rank: int, max_steps: int) -> None:
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset), drop_last=True)
    for i, (x, y) in enumerate(loader):
        if i >= max_steps:
            break
        loss = torch.nn.functional.cross_entropy(model(x.to(local_rank)), y.to(local_rank))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
