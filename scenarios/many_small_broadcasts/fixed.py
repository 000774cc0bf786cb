"""The fix of main.py: the module state coalesced into one buffer and broadcast once (what DDP has
done since it coalesced its broadcasts). Same model and result."""
import datetime
import os

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


class Net(torch.nn.Module):
    def __init__(self, n_stats=int(os.environ.get("SCENARIO_BUFFERS", "50"))):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        for i in range(n_stats):
            self.register_buffer(f"stat_{i}", torch.zeros(4 + i % 5))


def sync_module_state(module, src=0):
    with torch.no_grad():
        tensors = list(module.parameters()) + list(module.buffers())
        flat = _flatten_dense_tensors(tensors)
        dist.broadcast(flat, src=src)  # one collective for the whole state
        for t, synced in zip(tensors, _unflatten_dense_tensors(flat, tensors)):
            t.copy_(synced)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = Net()
    if rank == 0:
        for b in model.buffers():
            b.fill_(1.0)
    sync_module_state(model, src=0)
    ok = all(bool((b == 1.0).all()) for b in model.buffers())
    print(f"rank {rank}: state synced, buffers ok={ok}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
