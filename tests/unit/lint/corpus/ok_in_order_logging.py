"""accelerate's MultiProcessAdapter.log, written out (accelerate/logging.py): a message printed on
the main process only, or by every process in turn with a barrier after each turn when
`in_order` is set; `in_order` is an argument, the same on every rank.

shape: d (correlated conditions) — `if not in_order and is_main: print(...) elif in_order: for i
in range(world): if i == rank: print(...); dist.barrier()`: the `elif` is the else of a per-rank
condition, but every rank reaches it when in_order is set.
truth: correct — with in_order every rank issues `world` barriers, without it none. Exits 0.
"""
import datetime
import os

import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def log(message: str, in_order: bool = False) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    is_main = rank == 0
    if not in_order and is_main:
        print(message)
    elif in_order:
        for i in range(world):
            if i == rank:
                print(f"[rank {rank}] {message}")
            dist.barrier()


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    log("starting")
    log("each rank in turn", in_order=True)
    log("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
