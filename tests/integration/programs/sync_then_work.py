"""Two ranks: each step all-reduces a 1 MB tensor, then works 10 ms (a sleep: work off the CPU, as
a GPU kernel or a data load) on something that does not read the result. STEPS steps with a
synchronous all-reduce, then STEPS more issuing it with async_op=True and waiting before the next
step reads it."""
import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
t = torch.ones(1 << 18)
steps = int(os.environ.get("STEPS", "20"))
for step in range(steps):
    dist.all_reduce(t)  # @reduce
    time.sleep(0.010)  # the next batch: does not read t
    t /= dist.get_world_size()
for step in range(steps):
    work = dist.all_reduce(t, async_op=True)  # @async
    time.sleep(0.010)
    work.wait()
    t /= dist.get_world_size()
print(f"rank {dist.get_rank()}: sum {t.sum().item():.1f}", flush=True)
dist.destroy_process_group()
