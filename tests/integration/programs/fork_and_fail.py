"""A forking DataLoader during a recorded job, then (argv[1] == "break") an internal recorder error.

Rank 1 breaks its recorder after a few collectives: recording must stop with one warning and the
job must go on with correct results."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    data = TensorDataset(torch.arange(16, dtype=torch.float32).reshape(8, 2))
    loader = DataLoader(data, batch_size=2, num_workers=2, multiprocessing_context="fork")
    total = torch.zeros(2)
    for (x,) in loader:
        s = x.sum(0)
        dist.all_reduce(s)
        total += s
    os.write(1, f"rank {rank} loader total {total.tolist()}\n".encode())
    if len(sys.argv) > 1 and sys.argv[1] == "break" and rank == 1:
        from collcheck.capture import session

        session.recorder().dtype_name = None  # the next record raises inside the recorder
    for i in range(3):
        t = torch.ones(3) * (rank + 1 + i)
        dist.all_reduce(t)
        os.write(1, f"rank {rank} after {i}: {t.tolist()}\n".encode())
    objs = [None, None]
    dist.all_gather_object(objs, rank)
    os.write(1, f"rank {rank} objects {objs}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
