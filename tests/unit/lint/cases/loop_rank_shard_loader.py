"""Each rank reads its own shard file (`part-{rank}`): the loop's trip count may differ, and so would DDP's
backwards. The rank names the file; how many samples it holds is this rank's data (a warning)."""
# expect: kind local

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def train(model, optimizer, local_rank: int) -> None:
    rank = dist.get_rank()
    shard = torch.load(f"data/part-{rank:05d}.pt")
    loader = DataLoader(TensorDataset(shard["x"], shard["y"]), batch_size=32)
    model = DDP(model.to(local_rank), device_ids=[local_rank])
    for x, y in loader:  # expect: branch a
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x.to(local_rank)), y.to(local_rank))
        loss.backward()  # expect: call a
        optimizer.step()
