"""`mp.spawn(worker, ...)` passes the process index as the worker's first argument: `rank` is rank-valued."""
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank: int, world_size: int) -> None:
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    tensor = torch.ones(4, device=f"cuda:{rank}")
    if rank == 0:  # expect: branch a
        dist.all_reduce(tensor)  # expect: call a
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size,), nprocs=world_size, join=True)
