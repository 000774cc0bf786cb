"""FSDP2 (fully_shard on each layer and the root) on 2 gloo ranks, 4 SGD steps. At step 2 rank 1's
loss is not finite (injected: a bad batch), so it skips backward() and optimizer.step(), as a
NaN guard does, and goes on to step 3's forward while rank 0 runs step 2's backward (its
all-gathers and reduce-scatters). The job's group timeout (SCENARIO_TIMEOUT_S, default 6 s)
bounds the hang."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
dist.init_process_group("gloo", timeout=timeout)
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("dp",))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))  # equal shards
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(4):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(10 * rank + step))
    loss = model(x).square().mean()  # @forward
    if rank == 1 and step == 2:
        loss = loss * float("nan")  # injected: this rank's batch gives a non-finite loss
    if not torch.isfinite(loss):
        print(f"rank {rank}: non-finite loss at step {step}, skipping the step")
        optimizer.zero_grad()
        continue  # @skip
    loss.backward()  # @backward
    optimizer.step()
    optimizer.zero_grad()
dist.destroy_process_group()
