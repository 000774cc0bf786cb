"""FSDP2 mixture of experts on 2 gloo ranks: each expert is its own FSDP unit; rank 1 skips
expert 1 in the second step (it got no tokens), so its all-gathers shift against rank 0's."""
import datetime

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
torch.manual_seed(0)


class MoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x, skip=()):
        out = x
        for i, expert in enumerate(self.experts):
            if i in skip:  # no tokens routed here on this rank
                continue
            out = out + expert(x)  # @expert
        return out


model = MoE()
for expert in model.experts:
    fully_shard(expert, mesh=mesh)
fully_shard(model, mesh=mesh)
for step in range(2):
    skip = (1,) if rank == 1 and step == 1 else ()
    model(torch.randn(4, 8), skip=skip).sum().backward()  # @step
dist.destroy_process_group()
