"""A nested function that reads the enclosing function's `rank` (a closure) and branches on it."""
import torch
import torch.distributed as dist


def main(epochs: int) -> None:
    dist.init_process_group("nccl")
    rank = dist.get_rank() if dist.is_initialized() else 0
    model = torch.nn.Linear(4, 4).cuda()

    def checkpoint(epoch: int) -> None:
        if rank == 0:  # expect: branch a
            torch.save(model.state_dict(), f"epoch{epoch}.pt")
            dist.barrier()  # expect: call a

    for epoch in range(epochs):
        checkpoint(epoch)
