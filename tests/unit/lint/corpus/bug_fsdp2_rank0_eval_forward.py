"""FSDP2 (fully_shard on each Linear and the root) on 2 gloo ranks, CPU: after training, rank 0
alone computes a validation loss with the sharded model; FSDP2's forward all-gathers each
layer's parameters before using them.

shape: rank-dependent branch around a sharded model's forward — `if rank == 0:
model(x_val)` (the forward of a fully_shard model issues collectives).
truth: buggy — rank 0's forward all-gathers meet rank 1's final barrier.
expected lint target: bug_fsdp2_rank0_eval_forward.py:38 (the call, marker @bug) under the condition
at line 36 (marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    for layer in (model[0], model[2]):
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2):
        model(torch.randn(4, 8)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    if rank == 0:  # @cond
        with torch.no_grad():
            val = model(torch.randn(32, 8)).square().mean()  # @bug
        print(f"rank 0: validation {val.item():.4f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
