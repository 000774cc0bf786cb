"""Collectives torch itself issues for frameworks other than DDP, on 2 gloo ranks: FSDP2
(`fully_shard` over a 1-D mesh: forward all-gathers, backward all-gathers and reduce-scatters),
DTensor (`distribute_tensor`, `full_tensor()`), FSDP1 (`FullyShardedDataParallel` with a nested
unit), DDP for contrast, and a user's own all_reduce.
Each phase is announced on stdout ("PHASE name") and marked in the log by a user all_reduce of a
distinct size, so a test can tell which collectives each phase issued."""
import datetime

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))


def mark(n: int) -> None:
    dist.all_reduce(torch.zeros(n))  # @mark


torch.manual_seed(0)
mark(101)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
for _ in range(2):
    model(torch.randn(4, 8)).sum().backward()  # @fsdp
mark(102)
weight = distribute_tensor(torch.randn(8, 8), mesh, [Shard(0)])  # @distribute
full = weight.full_tensor()  # @full_tensor
replicated = weight.redistribute(mesh, [Replicate()])  # @redistribute
product = torch.mm(weight, weight)  # @implicit
mark(103)
ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 2))  # @ddp
ddp(torch.randn(3, 4)).sum().backward()  # @ddp_backward
mark(104)
fsdp1 = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(8, 4)))
fsdp1[2] = FullyShardedDataParallel(fsdp1[2], device_id=torch.device("cpu"))
fsdp1 = FullyShardedDataParallel(fsdp1, device_id=torch.device("cpu"))
fsdp1(torch.randn(4, 8)).sum().backward()  # @fsdp1
mark(105)
dist.destroy_process_group()
