"""Valid: gradient averaging by hand, one all_reduce per parameter gradient.

The pattern from the forum thread "Slow NCCL gradient synchronization in distributed
training" (VGG11 over 16 nodes): `for param in model.parameters(): dist.all_reduce(param.grad)`.
Correct on every rank, but one collective per tensor instead of DDP's bucketed all-reduces.
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(100 + rank)
    for step in range(int(os.environ.get("SCENARIO_STEPS", "3"))):
        x, y = torch.randn(8, 16), torch.randn(8, 4)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        for param in model.parameters():
            dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
            param.grad /= world
        opt.step()
    checksum = sum(p.sum().item() for p in model.parameters())
    print(f"rank {rank}: done, parameter checksum {checksum:.6f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
