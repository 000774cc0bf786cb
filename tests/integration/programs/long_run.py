"""A long loop for capped logs (COLLCHECK_MAX_MB). argv: steps [diverge_at [ddp|p2p]].

Each step: one world all_reduce, then collectives on the rank's own one-member group, rank 0
three per step and rank 1 one, so the two logs wrap at different points; with `ddp`, also a
DDP step (its gradient all-reduce comes from C++: the compiled path writes it); with `p2p`,
rank 0 sends rank 1 one tensor and rank 1 sends two back, so each rank's log holds its sends
and recvs at different rates and the channels wrap at different messages. At step
`diverge_at` (-1: never), rank 1 issues a broadcast where rank 0 issues an all_reduce, then
both stop."""
import datetime
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
rank = dist.get_rank()
steps = int(sys.argv[1])
diverge_at = int(sys.argv[2]) if len(sys.argv) > 2 else -1
ddp = None
extra = sys.argv[3] if len(sys.argv) > 3 else ""
if extra == "ddp":
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
own = [dist.new_group([r]) for r in range(dist.get_world_size())][rank]
t = torch.ones(4)
for step in range(steps):
    if step == diverge_at:
        if rank == 1:
            dist.broadcast(t, src=0)  # @diverge
        else:
            dist.all_reduce(t)
        break
    dist.all_reduce(t)  # @world
    for _ in range(3 if rank == 0 else 1):
        dist.all_reduce(t, group=own)  # @own
    if ddp is not None:
        ddp(t).sum().backward()
    if extra == "p2p":
        if rank == 0:
            dist.send(t, 1)  # @send
            dist.recv(t, 1)
            dist.recv(t, 1)
        elif rank == 1:
            dist.recv(t, 0)
            dist.send(t, 0)
            dist.send(t, 0)
dist.destroy_process_group()
