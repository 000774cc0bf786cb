"""FSDP2 + tensor parallel on a 2-D (dp=2, tp=2) mesh of 4 gloo ranks, correct: each block's MLP is
ColwiseParallel/RowwiseParallel over tp, each block and the root are fully_shard-ed over dp; a few
AdamW steps on per-dp-rank batches, then every rank all-gathers a weight with full_tensor().

argv[1] == "rank0_full_tensor": the bug: only rank 0 all-gathers the weight (for a log line), the
others go on to the final barrier."""
import datetime
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6 if sys.argv[1:] else 10))
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(0)  # the same initial weights on every rank


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block() for _ in range(2))
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


model = Model()
for block in model.blocks:
    parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    fully_shard(block, mesh=mesh["dp"])
fully_shard(model, mesh=mesh["dp"])
optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
torch.manual_seed(1 + mesh.get_local_rank("dp"))  # tp peers see the same batch, dp ranks differ
for step in range(3):
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    loss = torch.nn.functional.mse_loss(model(x), y)  # @forward
    loss.backward()  # @backward
    optim.step()  # @step
    optim.zero_grad()
rank0_only = sys.argv[1:] == ["rank0_full_tensor"]
if rank == 0 or not rank0_only:
    weight = model.blocks[0].up.weight.full_tensor()  # @full_tensor
    if rank == 0:
        print("blocks.0.up.weight", tuple(weight.shape), weight.norm().item())
dist.barrier()  # @barrier
dist.destroy_process_group()
