"""An `elif` on the rank and a rank test joined with a uniform one (`rank == 0 and step % 100 == 0`)."""
import torch
import torch.distributed as dist


def step_end(step: int, loss: torch.Tensor) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        print(f"step {step}")
    elif rank == world_size - 1:  # expect: branch elif
        dist.all_reduce(loss)  # expect: call elif
    if rank == 0 and step % 100 == 0:  # expect: branch and
        dist.barrier()  # expect: call and
