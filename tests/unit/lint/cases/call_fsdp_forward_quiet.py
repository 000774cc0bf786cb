"""The twin of call_fsdp_forward: every rank runs the FSDP forward, rank 0 only prints; a plain module on rank 0 is fine."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    probe = torch.nn.Linear(10, 2).cuda()
    model = FSDP(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).cuda())
    logits = model(torch.randn(8, 64, device="cuda"))
    if rank == 0:
        print(probe(logits.detach()).argmax(-1))
    dist.destroy_process_group()
