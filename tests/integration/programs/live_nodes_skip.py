"""Four ranks on two torchrun "nodes", each node recording into a folder of its own: rank 3 (on
the second node to join) skips the barrier the others wait in and goes on to the next all_reduce,
where it waits (group timeout 60 s: only live mode ends the job early). Every rank stays alive."""
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
dist.all_reduce(t)  # @after
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
