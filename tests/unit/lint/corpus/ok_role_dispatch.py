"""A role dispatch (torch's ddp_under_dist_autograd_test): rank 0 runs the coordinator's function
and the other ranks the worker's, each in its own function, and the two functions issue the same
collectives in the same order (a broadcast of the work from the coordinator, a gather of the
results to it).

shape: d (a rank test choosing between functions with matching collectives) — `if rank == 0:
coordinator(...) else: worker(...)`.
truth: correct — every rank issues one broadcast and one gather. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def coordinator(world: int) -> torch.Tensor:
    work = torch.arange(4.0)
    dist.broadcast(work, src=0)
    results = [torch.empty(4) for _ in range(world)]
    dist.gather(work * 0, gather_list=results, dst=0)
    return torch.stack(results).sum(0)


def worker(rank: int) -> None:
    work = torch.empty(4)
    dist.broadcast(work, src=0)
    dist.gather(work * rank, dst=0)


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    if rank == 0:
        total = coordinator(world)
        assert total.tolist() == [0.0, 1.0, 2.0, 3.0], total
        print(f"rank 0: {total.tolist()}")
    else:
        worker(rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
