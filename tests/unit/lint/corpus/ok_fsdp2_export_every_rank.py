"""FSDP2 (fully_shard on each Linear and the root) on 2 gloo ranks, CPU: two training steps, then
a user's export helper builds the full state dict (get_model_state_dict(full_state_dict=True):
an all-gather per parameter) on every rank, and only rank 0 serialises it.

shape: c (a call that issues collectives, called on every rank) — `state = export(model)` outside
any condition, `if rank == 0: torch.save(state, buffer)` with no collective inside.
truth: correct — every rank all-gathers. Exits 0.
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


def export(model: torch.nn.Module) -> dict:
    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


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
    state = export(model)
    if rank == 0:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        print(f"rank 0: exported {len(buffer.getvalue())} bytes")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
