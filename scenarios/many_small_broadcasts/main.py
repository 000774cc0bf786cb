"""Valid: rank 0's module state is broadcast to the other ranks one tensor at a time.

This is what DDP did before pytorch/pytorch#4978 coalesced the broadcasts: a model with
many small buffers (here 50 running-statistics buffers plus its parameters) costs one
broadcast per tensor.  Correct, just slow at scale.
"""
import datetime
import os
import torch
import torch.distributed as dist


class Net(torch.nn.Module):
    def __init__(self, n_stats=int(os.environ.get("SCENARIO_BUFFERS", "50"))):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        for i in range(n_stats):
            self.register_buffer(f"stat_{i}", torch.zeros(4 + i % 5))


def sync_module_state(module, src=0):
    with torch.no_grad():
        for tensor in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(tensor, src=src)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)  # every rank initialises differently ...
    model = Net()
    if rank == 0:
        for b in model.buffers():
            b.fill_(1.0)
    sync_module_state(model, src=0)  # ... until rank 0's state is broadcast
    ok = all(bool((b == 1.0).all()) for b in model.buffers())
    print(f"rank {rank}: state synced, buffers ok={ok}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
