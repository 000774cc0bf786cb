"""Bug: a DDP training epoch runs fine, then evaluation all_gathers per-batch predictions and
the last validation batch is smaller on one rank.

About 260 collectives per rank come first (a DDP gradient bucket and a logged-loss all_reduce
per step); the mismatch is the last one. This is the long recording that `collcheck replay
--emit-script` must shrink to a few collectives.
"""
import datetime
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STEPS = 128
BATCH = 4


def train(model, rank):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    for _ in range(STEPS):
        x, y = torch.randn(8, 3), torch.randn(8, 1)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged)  # average loss for the progress bar


def evaluate(model, rank, world):
    n_samples = 10 - rank  # the validation set does not split evenly
    data = torch.randn(n_samples, 3)
    gathered = []
    with torch.no_grad():
        for start in range(0, n_samples, BATCH):
            preds = model(data[start:start + BATCH]).squeeze(1)
            out = [torch.empty_like(preds) for _ in range(world)]
            dist.all_gather(out, preds)  # collcheck: culprit
            gathered.extend(out)
    return gathered


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(3, 1))
    train(model, rank)
    gathered = evaluate(model, rank, world)
    print(f"rank {rank}: gathered {sum(t.numel() for t in gathered)} predictions", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
