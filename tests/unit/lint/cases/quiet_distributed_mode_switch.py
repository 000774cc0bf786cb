"""`if local_rank != -1:` / `if args.local_rank == -1:` choose distributed mode: the same answer on every rank."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def setup(model: torch.nn.Module):
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=int(os.environ.get("LOCAL_RANK", -1)))
    args = parser.parse_args()
    if args.local_rank == -1:
        device = torch.device("cuda")
    else:
        torch.cuda.set_device(args.local_rank)
        device = torch.device("cuda", args.local_rank)
        dist.init_process_group(backend="nccl")
    local_rank = args.local_rank
    model = model.to(device)
    if local_rank != -1:
        model = DDP(model, device_ids=[local_rank])
        dist.barrier()
    return model, device
