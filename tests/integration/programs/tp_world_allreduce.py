"""A 2-D (dp, tp) mesh of 4 gloo ranks: a tensor-parallel MLP by hand (the hidden layer split
over tp, its partial outputs all-reduced in the tp group), gradients averaged over dp, 3 steps.
After step 2 each tp group sums its loss for the log line: the tp leaders (tp-local rank 0, which
print it) call all_reduce without group=, so on WORLD, while the other ranks pass their tp group.
The job's group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang."""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
dist.init_process_group("gloo", timeout=timeout)
rank = dist.get_rank()
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
tp_group, dp_group = mesh["tp"].get_group(), mesh["dp"].get_group()
tp_rank = mesh["tp"].get_local_rank()
torch.manual_seed(tp_rank)  # this rank's shard of the hidden layer, the same on both dp replicas
up = torch.nn.Linear(8, 8)  # 16 hidden units split over tp
down = torch.nn.Linear(8, 4, bias=False)
params = [*up.parameters(), *down.parameters()]
dist.barrier()  # @setup_barrier


def forward(x):
    partial = down(torch.relu(up(x)))
    dist.all_reduce(partial, group=tp_group)  # @tp_forward (a real TP layer's all-reduce, gradient aside)
    return partial


for step in range(3):
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(100 * mesh["dp"].get_local_rank() + step))
    loss = forward(x).square().mean()
    loss.backward()
    for p in params:
        dist.all_reduce(p.grad, group=dp_group)  # @dp_grads
        p.data -= 0.01 * p.grad / 2
        p.grad = None
    if step == 1:
        logged = loss.detach().clone()
        if tp_rank == 0:  # the leader sums its tp group's loss and prints it
            dist.all_reduce(logged)  # @world_allreduce  (group= forgotten: WORLD)
            print(f"step {step} loss {logged.item():.4f}")
        else:
            dist.all_reduce(logged, group=tp_group)  # @tp_allreduce
dist.barrier()  # @final_barrier
dist.destroy_process_group()
