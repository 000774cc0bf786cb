"""NCCL's semantics on the simulated backend, one mode per behaviour (2 ranks, run with
COLLCHECK_SIMNCCL=1; the program names gloo like any scenario):
  silent   rank 0 calls barrier() where rank 1 all-reduces a float32[1], then both all-reduce an
           int64[1] where rank 1 all-reduces a float64[1] (same bytes): everything completes
  ahead    rank 1 never reaches the collectives (it sleeps past the timeout); rank 0 issues 60
           all-reduces, returning at once from each, then reads a result: its CPU waits there
  p2p      (3 ranks) rank 0 sends to rank 1, then every rank all-reduces: P2P has its own
           streams and counts, the all-reduce pairs across all three"""
import datetime
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=4))
rank = dist.get_rank()
mode = sys.argv[1]
if mode == "silent":
    t = torch.tensor([5.0])
    if rank == 0:
        dist.barrier()  # @barrier
    else:
        dist.all_reduce(t)  # @allreduce
    swapped = torch.tensor([3], dtype=torch.int64) if rank == 0 else torch.tensor([2.0], dtype=torch.float64)
    dist.all_reduce(swapped)  # @swap
    print(f"rank {rank} result {t.item()} swapped {swapped.item()}", flush=True)
elif mode == "ahead":
    if rank == 1:
        time.sleep(12)
    else:
        x = torch.ones(4)
        for _ in range(60):
            dist.all_reduce(x)  # @ahead
        print("issued 60", flush=True)
        print(x.tolist(), flush=True)  # @sync
elif mode == "p2p":
    x = torch.tensor([float(rank)])
    if rank == 0:
        dist.send(torch.tensor([7.0]), 1)
    elif rank == 1:
        dist.recv(x, 0)
    dist.all_reduce(x)
    print(f"rank {rank} sum {x.item()}", flush=True)
dist.destroy_process_group()
