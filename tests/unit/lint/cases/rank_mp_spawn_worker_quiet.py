"""The twin of rank_mp_spawn_worker: the spawned worker branches on `world_size`, the same on every rank."""
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank: int, world_size: int) -> None:
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    tensor = torch.ones(4, device=f"cuda:{rank}")
    if world_size > 1:
        dist.all_reduce(tensor)
    if rank == 0:
        print(tensor)
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size,), nprocs=world_size, join=True)
