"""The backward of a DDP module's output all-reduces gradients: rank 0 alone running an extra step hangs."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    model = DDP(torch.nn.Linear(32, 1).cuda(), device_ids=[rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.randn(16, 32, device="cuda")).pow(2).mean()
    if rank == 0:  # expect: branch a
        loss.backward()  # expect: call a
        optimizer.step()
    dist.destroy_process_group()
