"""A parameter that receives the rank (`train(dist.get_rank())`) and is tested inside the callee."""
import torch
import torch.distributed as dist


def train(rank: int, steps: int) -> None:
    model = torch.nn.Linear(8, 8).cuda()
    for step in range(steps):
        model(torch.randn(4, 8, device="cuda")).sum().backward()
    if rank == 0:  # expect: branch a
        dist.barrier()  # expect: call a


def main():
    dist.init_process_group("nccl")
    train(dist.get_rank(), steps=10)


if __name__ == "__main__":
    main()
