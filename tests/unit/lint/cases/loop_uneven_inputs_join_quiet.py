"""The fix for loop_uneven_inputs_ddp: under `with model.join():` DDP shadows the missing backwards of finished ranks."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

N = 8


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    model = DDP(torch.nn.Linear(16, 1).cuda(), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs = [torch.randn(32, 16, device="cuda") for _ in range(N + rank)]
    with model.join():
        for x in inputs:
            optimizer.zero_grad()
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    dist.destroy_process_group()
