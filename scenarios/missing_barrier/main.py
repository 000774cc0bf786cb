"""Bug: early stopping decided per rank, so rank 1 leaves the loop before the epoch barrier.

Each epoch trains (gradients averaged with all_reduce), evaluates on the rank's own
validation shard and ends with dist.barrier().  The stop test uses the rank-local
validation loss, never all-reduced: rank 1's shard is cleaner, its loss drops below the
target after epoch 1, it breaks out of the loop and shuts down cleanly, while rank 0
waits in the epoch-1 barrier that rank 1 never reaches.
"""
import datetime
import os
import torch
import torch.distributed as dist

TARGET = 1.0  # stop once the validation loss is below this


def shard(rank, n):
    gen = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(n, 4, generator=gen)
    noise = 1.0 if rank == 0 else 0.05  # rank 1's shard is much less noisy
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + noise * torch.randn(n, 1, generator=gen)
    return x, y


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # same initial weights on every rank
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = shard(rank, 64)
    val_x, val_y = shard(rank, 32)
    for epoch in range(5):
        for i in range(0, 64, 16):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x[i:i + 16]), y[i:i + 16]).backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= world
            opt.step()
        with torch.no_grad():
            val_loss = torch.nn.functional.mse_loss(model(val_x), val_y).item()
        print(f"rank {rank}: epoch {epoch} val loss {val_loss:.4f}", flush=True)
        if val_loss < TARGET:  # rank-local decision, never all-reduced
            print(f"rank {rank}: early stop after epoch {epoch}", flush=True)
            break  # collcheck: culprit
        dist.barrier()  # collcheck: culprit
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
