"""Bug: the same all_reduce uses MAX on rank 0 and SUM on rank 1.

A helper picks the reduction from a rank-local setting ("report the worst case" on the
logging rank, "total" elsewhere), so the ranks silently compute different results.
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    step_time = torch.rand(1) + rank
    is_logger = rank == 0
    op = dist.ReduceOp.MAX if is_logger else dist.ReduceOp.SUM
    dist.all_reduce(step_time, op=op)  # collcheck: culprit
    print(f"rank {rank}: reduced step time {step_time.item():.4f} with {op}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
