"""Four ranks on two torchrun "nodes": rank 3 (on the second node) leaves before the barrier the
others wait in (group timeout 60 s: only live mode ends the job early)."""
import datetime

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
t = torch.ones(4)
for step in range(3):
    dist.all_reduce(t)
if rank != 3:
    dist.barrier()  # @barrier
    print(f"rank {rank} passed the barrier", flush=True)
dist.destroy_process_group()
