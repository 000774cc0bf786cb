"""A rank that skips a non-finite local loss (`if torch.isnan(loss): continue`) skips DDP's gradient all-reduce."""
# expect: kind local
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train(model, dataset, optimizer, local_rank: int):
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
    for x, y in loader:
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(local_rank)), y.to(local_rank))
        if torch.isnan(loss):  # expect: branch a
            continue
        loss.backward()  # expect: call a
        optimizer.step()
    dist.destroy_process_group()
