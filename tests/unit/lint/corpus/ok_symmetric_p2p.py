"""A two-rank exchange with blocking point-to-point calls ordered so that they pair: rank 0 sends
then receives, rank 1 receives then sends (a 4 MiB tensor each way).

shape: d (symmetric p2p) — `if rank == 0: dist.send(...); dist.recv(...) else: dist.recv(...);
dist.send(...)`: the rank test is how point-to-point code is written.
truth: correct — every send meets its receive. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    mine = torch.full((1024 * 1024,), float(rank))
    theirs = torch.empty_like(mine)
    if rank == 0:
        dist.send(mine, dst=1)
        dist.recv(theirs, src=1)
    else:
        dist.recv(theirs, src=0)
        dist.send(mine, dst=0)
    assert theirs[0].item() == 1 - rank
    print(f"rank {rank}: got {theirs[0].item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
