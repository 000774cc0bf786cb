"""`fully_shard(model)` wraps in place (FSDP2): the forward of `model` afterwards all-gathers parameters."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).cuda()
    fully_shard(model)
    sample = torch.randn(8, 64, device="cuda")
    if rank == 0:  # expect: branch a
        logits = model(sample)  # expect: call a
        print(logits.argmax(-1))
    dist.destroy_process_group()
