"""DDP with a BatchNorm buffer and uneven inputs under join(): rank r trains 3 + 2r batches."""
import datetime

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank = dist.get_rank()
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    model = DDP(net)  # @ddp
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(1 + rank)
    batches = [torch.randn(3, 4) for _ in range(3 + 2 * rank)]
    with model.join():  # @join
        for x in batches:
            opt.zero_grad()
            loss = model(x).pow(2).mean()  # @forward
            loss.backward()  # @backward
            opt.step()
    checksum = sum(p.sum().item() for p in model.parameters())
    print(f"rank {rank}: {len(batches)} batches, checksum {checksum:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
