"""A DistributedSampler given `rank=` explicitly still gives every rank as many batches."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler


def train(model, dataset, optimizer) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, drop_last=True)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler, num_workers=2)
    model = DDP(model.cuda(rank), device_ids=[rank])
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x.cuda(rank)), y.cuda(rank))
        loss.backward()
        optimizer.step()
