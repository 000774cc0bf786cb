"""FSDP2 (fully_shard on each Linear and the root) on 2 gloo ranks, CPU: after each epoch rank 0
alone builds the full state dict to save it, with torch.distributed.checkpoint's
get_model_state_dict(full_state_dict=True), which all-gathers every parameter's shards.

shape: a library function that issues collectives, called under `if rank == 0`.
truth: buggy — rank 0's first all-gather of the export meets rank 1's next forward all-gather.
expected lint target: bug_fsdp2_rank0_state_dict.py:39 (the call, marker @bug) under the condition
at line 38 (marker @cond).
"""
import datetime
import io
import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
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
    for epoch in range(2):
        for step in range(2):
            model(torch.randn(4, 8)).square().mean().backward()
            opt.step()
            opt.zero_grad()
        if rank == 0:  # @cond
            state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))  # @bug
            torch.save(state, io.BytesIO())
    print(f"rank {rank}: trained")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
