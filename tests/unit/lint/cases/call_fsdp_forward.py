"""The forward of an FSDP-wrapped module all-gathers its parameters: rank 0 alone evaluating it hangs."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).cuda()
    model = FSDP(model)
    sample = torch.randn(8, 64, device="cuda")
    if rank == 0:  # expect: branch a
        logits = model(sample)  # expect: call a
        print(logits.argmax(-1))
    dist.destroy_process_group()
