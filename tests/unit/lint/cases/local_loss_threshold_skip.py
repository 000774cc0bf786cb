"""Skipping a step when this rank's loss value is too large (`loss.item() > max_loss`) skips DDP's backward."""
# expect: kind local
import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train(model, dataset, optimizer, local_rank: int, max_loss: float = 1e3) -> None:
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    loader = DataLoader(dataset, batch_size=16, sampler=DistributedSampler(dataset))
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.to(local_rank)), y.to(local_rank))
        if loss.item() > max_loss:  # expect: branch a
            continue
        loss.backward()  # expect: call a
        optimizer.step()
        optimizer.zero_grad()
