"""Bug: accuracy counters are int32 on ranks with data but float32 on a rank with an empty shard.

Both tensors have two elements of four bytes, so gloo reduces the raw bytes without
complaint and every rank reads back garbage counts.
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    shard = torch.randint(0, 2, (6,)) if rank == 0 else torch.empty(0)  # rank 1 got no samples
    if len(shard) > 0:
        counts = torch.tensor([int(shard.sum()), len(shard)], dtype=torch.int32)
    else:
        counts = torch.zeros(2)  # default dtype: float32
    dist.all_reduce(counts)  # collcheck: culprit
    correct, total = counts.tolist()
    print(f"rank {rank}: correct={correct} total={total} dtype={counts.dtype}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
