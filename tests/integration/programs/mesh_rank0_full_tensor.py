"""A DTensor on a 2-D (dp, tp) mesh of 4 gloo ranks; only rank 0 enters a debugging branch that
calls full_tensor() (all-gathers on its tp and dp groups) while ranks 1-3 go on to a barrier."""
import datetime

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=10))
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
weight = distribute_tensor(torch.randn(8, 8), mesh, [Shard(0), Shard(1)])
for _ in range(2):
    replicated = weight.redistribute(mesh, [Shard(0), Replicate()])
if rank == 0:
    print(weight.full_tensor().sum())  # @full_tensor
dist.barrier()  # @barrier
dist.destroy_process_group()
