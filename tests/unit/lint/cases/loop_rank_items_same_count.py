"""Loops over lists built from the rank: as many items on every rank (quiet) or not (a finding)."""
import torch
import torch.distributed as dist


def cases_for(rank: int, world: int) -> list:
    return [((rank + 1) * k, k * world) for k in range(3)]


def main():
    rank, world = dist.get_rank(), dist.get_world_size()
    for value, expected in cases_for(rank, world):  # three items everywhere
        dist.all_reduce(torch.tensor([float(value)]))
    mine = [k * rank for k in range(4)]
    for v in mine:  # four items everywhere
        dist.all_reduce(torch.tensor([float(v)]))
    short = [k for k in range(rank)]
    for v in short:  # expect: branch a
        dist.all_reduce(torch.tensor([float(v)]))  # expect: call a
    odd = [k * rank for k in range(4) if k % (rank + 1) == 0]
    for v in odd:  # expect: branch b
        dist.barrier()  # expect: call b
