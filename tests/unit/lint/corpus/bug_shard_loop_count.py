"""Plain torch.distributed: each rank takes its strided shard of 5 samples (`samples[rank::world]`:
3 on rank 0, 2 on rank 1) and all_reduces a gradient per sample.

shape: a uniform-looking but per-rank loop count — `for x in samples[rank::world]:
dist.all_reduce(...)`.
truth: buggy — rank 0 issues a third all_reduce that rank 1 never does (rank 1 is at the final
barrier).
expected lint target: bug_shard_loop_count.py:28 (the call, marker @bug) in the loop at line 26
(marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    samples = [torch.randn(8) for _ in range(5)]
    weight = torch.zeros(8)
    for x in samples[rank::world]:  # @cond
        grad = x - weight
        dist.all_reduce(grad)  # @bug
        weight += 0.1 * grad / world
    dist.barrier()
    print(f"rank {rank}: weight norm {weight.norm():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
