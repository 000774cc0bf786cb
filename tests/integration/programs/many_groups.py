"""Four ranks create a group for every pair of ranks (6 groups), then use one of them for 20
all-reduces and two of them for one broadcast each: three groups are never used."""
import datetime
import itertools

import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
groups = {pair: dist.new_group(list(pair)) for pair in itertools.combinations(range(4), 2)}  # @create
t = torch.ones(16)
if rank in (0, 1):
    for _ in range(20):
        dist.all_reduce(t, group=groups[(0, 1)])
for pair in ((0, 2), (1, 3)):
    if rank in pair:
        dist.broadcast(t, src=pair[0], group=groups[pair])
dist.barrier()
dist.destroy_process_group()
