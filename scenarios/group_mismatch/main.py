"""Bug: process groups created lazily, in a rank-dependent order.

new_group() must be called by every rank, for every group, in the same order: groups
are matched by their creation sequence number, not by what the code calls them.  Here
rank 0 creates the "metrics" group when it sets up its logger (only the main rank has a
logger), the other rank creates it on first use, after the "grads" group.  So group #1
is "metrics" on rank 0 but "grads" on rank 1.
"""
import datetime
import os
import torch
import torch.distributed as dist

_groups = {}


def get_group(name):
    if name not in _groups:  # created on first use
        _groups[name] = dist.new_group(timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))), group_desc=name)  # collcheck: culprit
    return _groups[name]


class MetricsLogger:
    def __init__(self):
        self.group = get_group("metrics")

    def log(self, step, loss):
        t = torch.tensor([loss])
        dist.all_reduce(t, group=get_group("metrics"))
        if dist.get_rank() == 0:
            print(f"step {step}: loss {t.item() / dist.get_world_size():.4f}", flush=True)


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    logger = MetricsLogger() if rank == 0 else None  # only the main rank sets up logging
    torch.manual_seed(1 + rank)
    for step in range(2):
        model.zero_grad()
        loss = model(torch.randn(4, 8)).pow(2).mean()
        loss.backward()
        flat = torch.cat([p.grad.flatten() for p in model.parameters()])
        dist.all_reduce(flat, group=get_group("grads"))
        if logger is None:
            t = torch.tensor([loss.item()])
            dist.all_reduce(t, group=get_group("metrics"))
        else:
            logger.log(step, loss.item())
    print(f"rank {rank}: done", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
