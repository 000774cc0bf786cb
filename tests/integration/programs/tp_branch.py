"""Tensor parallel MLP (ColwiseParallel up, RowwiseParallel down) on a 1-D tp mesh of 2 gloo ranks,
a few SGD steps; at the last step only rank 0 computes the full weight norm for its log line,
so its full_tensor() all-gather meets rank 1's next forward/backward collectives (or none)."""
import datetime

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
torch.manual_seed(0)


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


model = parallelize_module(MLP(), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
optim = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(3):
    x = torch.randn(4, 8)  # same seed on every rank: the same batch
    loss = model(x).pow(2).mean()  # @forward
    loss.backward()  # @backward
    optim.step()
    optim.zero_grad()
    if rank == 0 and step == 1:  # log the weight norm from one rank only
        print("up.weight norm", model.up.weight.full_tensor().norm().item())  # @full_tensor
dist.barrier()  # @barrier
dist.destroy_process_group()
