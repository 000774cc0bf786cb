"""Calls on fake and meta tensors (what torch.compile tracing makes) and a compiled functional
all_reduce: only the real executions may be recorded. argv: log directory, master port."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

import collcheck
from torch._subclasses.fake_tensor import FakeTensorMode

directory, port = sys.argv[1], sys.argv[2]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
collcheck.enable(directory, run_id="compiled")
dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=10))


@torch.compile(backend="aot_eager", fullgraph=True)  # @compiled
def step(x):
    return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1


with FakeTensorMode():
    dist.all_reduce(torch.ones(4))  # traced, never on the wire
dist.all_reduce(torch.ones(4, device="meta"))
for _ in range(3):
    out = step(torch.ones(4))
print("value", out.tolist(), flush=True)
dist.destroy_process_group()
