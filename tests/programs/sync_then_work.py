"""Two ranks: each step all-reduces a 1 MB tensor, then works 10 ms (a sleep: work off the CPU, as
a GPU kernel or a data load) on something that does not read the result. ASYNC=1 issues it with
async_op=True and waits before the next step reads it."""
import datetime
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
overlap = os.environ.get("ASYNC") == "1"
t = torch.ones(1 << 18)
start = time.perf_counter()
for step in range(int(os.environ.get("STEPS", "20"))):
    work = dist.all_reduce(t, async_op=overlap)  # @reduce
    time.sleep(0.010)  # the next batch: does not read t
    if overlap:
        work.wait()
    t /= dist.get_world_size()
print(f"rank {dist.get_rank()}: {time.perf_counter() - start:.4f} s, sum {t.sum().item():.1f}", flush=True)
dist.destroy_process_group()
