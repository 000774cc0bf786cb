"""`args.local_rank in [-1, 0]` is true on one rank per job, unlike the `== -1` distributed-mode switch."""
import argparse

import torch
import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()
    if args.local_rank != -1:
        torch.cuda.set_device(args.local_rank)
        dist.init_process_group("nccl")
    if args.local_rank in [-1, 0]:  # expect: branch a
        print("evaluating")
        dist.barrier()  # expect: call a
