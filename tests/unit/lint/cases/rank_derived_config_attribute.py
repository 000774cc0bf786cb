"""A rank test stored on the parsed arguments (`args.is_master = ...`) and read in the function they are passed to."""
import argparse

import torch
import torch.distributed as dist


def train(args: argparse.Namespace, model: torch.nn.Module) -> None:
    for epoch in range(args.epochs):
        if args.is_master:  # expect: branch a
            torch.save(model.state_dict(), f"{args.out}/epoch{epoch}.pt")
            dist.barrier()  # expect: call a


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="ckpt")
    args = parser.parse_args()
    dist.init_process_group("nccl")
    args.is_master = dist.get_rank() == 0
    train(args, torch.nn.Linear(4, 4).cuda())
