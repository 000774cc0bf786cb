"""pairwise_groups with what `collcheck stats` hints at: the all-reduces are a fixed cost paid per
call, so each pair all-reduces 8 iterations' tensors stacked in one call (same results, an eighth of
the calls). SCENARIO_ITERS and SCENARIO_ACTIVE_PAIRS as in main.py.
"""
import datetime
import os
import time

import torch
import torch.distributed as dist

BATCH = 8


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
    for first in range(0, iters if active else 0, BATCH):
        xs = torch.stack([torch.randn(10, 10) for _ in range(min(BATCH, iters - first))])
        dist.all_reduce(xs, group=pair)
        for x in xs:
            total += x
    elapsed = time.perf_counter() - start
    dist.barrier()
    if active and rank % 2 == 0:
        print(f"rank {rank}: {iters} all-reduces in {elapsed:.4f} s, {1e6 * elapsed / iters:.1f} µs each, "
              f"checksum {total.sum().item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
