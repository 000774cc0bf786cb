"""Each rank checks its own shard of a checkpoint for corruption; the verdicts are gathered with
all_gather_object and the ranks repair together only if some rank found damage (rank 1 does).

shape: b (made uniform by a collective) — `dist.all_gather_object(verdicts, local_ok); if not
all(verdicts): dist.all_reduce(...)`: the decision reads every rank's verdict, the same list
everywhere.
truth: correct — every rank takes the same branch. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = torch.ones(4) * (rank + 1)
    if rank == 1:
        shard[2] = float("inf")  # a damaged value on one rank
    local_ok = bool(torch.isfinite(shard).all())
    verdicts = [None] * world
    dist.all_gather_object(verdicts, local_ok)
    if not all(verdicts):
        shard = torch.nan_to_num(shard, posinf=0.0)
        dist.all_reduce(shard)  # rebuild from the sum of the shards
    print(f"rank {rank}: verdicts {verdicts}, shard {shard.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
