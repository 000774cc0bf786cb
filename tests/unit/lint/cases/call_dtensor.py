"""DTensor redistribution issues collectives: `full_tensor()`, `redistribute(mesh, [Replicate()])`, `distribute_tensor(...)`."""
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor


def inspect_weights(weight: torch.Tensor) -> None:
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    dt = distribute_tensor(weight, mesh, [Shard(0)])
    rank = dist.get_rank()
    if rank == 0:  # expect: branch full
        full = dt.full_tensor()  # expect: call full
        print(full.norm())
    if rank == 0:  # expect: branch redistribute
        replicated = dt.redistribute(mesh, [Replicate()])  # expect: call redistribute
        print(replicated.to_local().shape)
    if rank == 0:  # expect: branch distribute
        bias = distribute_tensor(torch.zeros(16), mesh, [Replicate()])  # expect: call distribute
        print(bias)
