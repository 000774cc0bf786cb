"""Valid: one process group per pair of consecutive ranks, each pair all-reducing small tensors.

The pattern from the forum thread "Improving inter-process communication costs for
`pytorch.distributed`": world size 2N, `new_group([i, i + 1])` for every pair, then 1,024
all-reduces of a 10x10 tensor inside each pair; the time per all-reduce grew linearly with N.
SCENARIO_ITERS sets the number of all-reduces (default 200), SCENARIO_ACTIVE_PAIRS how many pairs
communicate at once (default all; the others wait at the final barrier).
"""
import datetime
import os
import time

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    if world % 2:
        raise ValueError("the world size must be a multiple of 2")
    for i in range(0, world, 2):
        group = dist.new_group([i, i + 1])
        if rank in (i, i + 1):
            pair = group
    active = rank // 2 < int(os.environ.get("SCENARIO_ACTIVE_PAIRS", str(world // 2)))
    iters = int(os.environ.get("SCENARIO_ITERS", "200"))
    torch.manual_seed(rank // 2)
    total = torch.zeros(10, 10)
    start = time.perf_counter()
    for _ in range(iters if active else 0):
        x = torch.randn(10, 10)
        dist.all_reduce(x, group=pair)
        total += x
    elapsed = time.perf_counter() - start
    dist.barrier()
    if active and rank % 2 == 0:
        print(f"rank {rank}: {iters} all-reduces in {elapsed:.4f} s, {1e6 * elapsed / iters:.1f} µs each, "
              f"checksum {total.sum().item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
