"""A DataLoader with a DistributedSampler gives every rank the same number of batches: DDP's backward is fine."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler


def train(model, dataset, epochs: int, local_rank: int):
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x.to(local_rank)), y.to(local_rank))
            loss.backward()
            optimizer.step()
    dist.barrier()
