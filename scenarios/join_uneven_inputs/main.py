"""Valid: DDP training with uneven inputs per rank, handled by model.join().

The documented way to train with uneven inputs (torch.distributed.algorithms.Join,
"Distributed Training with Uneven Inputs Using the Join Context Manager" tutorial):
ranks that run out of data shadow the others' collectives until every rank is done.
Rank r has 4 + 2r batches; no extra collectives inside the join block.
"""
import datetime
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)
    batches = [torch.randn(3, 4) for _ in range(4 + 2 * rank)]
    with model.join():
        for x in batches:
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
    checksum = sum(p.sum().item() for p in model.parameters())
    print(f"rank {rank}: {len(batches)} batches, parameter checksum {checksum:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
