"""Bug: only rank 0 all-reduces the loss for logging, adding a collective the others never issue.

Logging code guarded by `if rank == 0:` that calls a collective (here an all_reduce to
average the loss across ranks before printing) pairs rank 0's metric all-reduce with the
other rank's next DDP gradient all-reduce.
"""
import datetime
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

LOG_EVERY = 2


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(10 + rank)
    for step in range(4):
        opt.zero_grad()
        loss = model(torch.randn(16, 8)).pow(2).mean()
        loss.backward()
        opt.step()
        if rank == 0 and step % LOG_EVERY == LOG_EVERY - 1:
            avg = loss.detach().clone()
            dist.all_reduce(avg)  # collcheck: culprit
            print(f"step {step}: mean loss {avg.item() / world:.4f}", flush=True)
    print(f"rank {rank}: finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
