"""Launched without torchrun (as multiprocessing.spawn and many scripts do): rank 0 serves the
job's TCPStore (MASTER_ADDR/MASTER_PORT), and the server goes with rank 0's default group. Each
rank all-reduces, destroys its group and exits; rank 1 leaves after rank 0 (and its store) is
gone. Usage: store_on_rank0.py RANK WORLD PORT."""
import datetime
import os
import socket
import sys
import time

import torch
import torch.distributed as dist

rank, world, port = (int(a) for a in sys.argv[1:4])
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
t = torch.ones(4)
for _ in range(20):
    dist.all_reduce(t)
dist.destroy_process_group()
if rank > 0:  # rank 0 exits meanwhile, its store with it: wait until its server is gone
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.05)
print(f"rank {rank} done", flush=True)
