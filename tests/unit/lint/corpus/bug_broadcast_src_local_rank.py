"""Plain torch.distributed: the node's configuration is meant to come from the node's first rank,
but the source is written as this rank's LOCAL_RANK, so every rank believes it is the source.

shape: a per-rank argument — `src = int(os.environ["LOCAL_RANK"])`; `dist.broadcast(cfg, src=src)`:
no condition, the root differs per rank.
truth: buggy — both ranks send as roots and nobody receives: gloo times out in the send.
expected lint target: bug_broadcast_src_local_rank.py:24 (the call, marker @bug); no condition: the
per-rank value comes from line 23 (marker @origin).
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    cfg = torch.tensor([0.1, 32.0, 4.0]) if rank == 0 else torch.zeros(3)
    src = int(os.environ["LOCAL_RANK"])  # @origin
    dist.broadcast(cfg, src=src)  # @bug
    print(f"rank {rank}: config {cfg.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
