"""The twin of local_nan_loss_continue: every rank runs backward, a non-finite loss only zeroes the step."""
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
        loss = torch.nan_to_num(loss, nan=0.0)
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()
