"""Bug: the checkpoint barrier sits inside `if rank == 0:`, so only rank 0 calls it.

The classic "dist.barrier() inside the main-process branch hangs" pattern: rank 0 saves
a checkpoint and then waits at a barrier that the other ranks never reach; they have
already moved on to the next epoch's all_reduce.
"""
import datetime
import os
import tempfile

import torch
import torch.distributed as dist


def train_one_epoch(model, rank):
    x = torch.randn(8, 4)
    loss = model(x).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    return loss.detach()


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    ckpt_dir = tempfile.mkdtemp()
    for epoch in range(2):
        model.zero_grad()
        loss = train_one_epoch(model, rank)
        if rank == 0:
            torch.save(model.state_dict(), os.path.join(ckpt_dir, f"epoch{epoch}.pt"))
            dist.barrier()  # collcheck: culprit
        print(f"rank {rank}: epoch {epoch} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
