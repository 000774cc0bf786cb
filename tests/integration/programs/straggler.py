"""Four ranks all-reduce every step; the straggler rank (STRAGGLER, default 2) sleeps a random
20-50 ms before each all-reduce, the others 0-5 ms."""
import datetime
import os
import random
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
slow = int(os.environ.get("STRAGGLER", "2"))
rng = random.Random(1000 + rank)
t = torch.ones(1024)
for step in range(int(os.environ.get("STEPS", "30"))):
    time.sleep(rng.uniform(0.020, 0.050) if rank == slow else rng.uniform(0.0, 0.005))
    dist.all_reduce(t)  # @step
dist.destroy_process_group()
