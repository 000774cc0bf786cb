"""A progress bar on rank 0 only (`tqdm(loader, disable=rank != 0)`): the bar differs per rank, the batch count does not."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler
from tqdm import tqdm


def train(model, dataset, optimizer, local_rank: int) -> None:
    rank = dist.get_rank()
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
    for x, y in tqdm(loader, disable=rank != 0, desc="train"):
        loss = torch.nn.functional.cross_entropy(model(x.to(local_rank)), y.to(local_rank))
        loss.backward()
        optimizer.step()
    batches = tqdm(loader) if rank == 0 else loader
    for x, y in batches:
        loss = torch.nn.functional.cross_entropy(model(x.to(local_rank)), y.to(local_rank))
        loss.backward()
        optimizer.step()
