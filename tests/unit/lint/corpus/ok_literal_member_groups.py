"""Groups written as literal member lists, each used under a condition naming the same ranks:
rank 0 alone keeps a running sum on its own group, rank 1 alone on another, then the pair
reduces on a group of both (2 gloo ranks).

shape: a (group members, literal lists) — `g0 = dist.new_group([0])` with `if rank == 0:
dist.all_reduce(t, group=g0)`, `if rank in (1,): dist.all_reduce(t, group=g1)`, `pair =
dist.new_group([0, 1])` with `if rank in [0, 1]:`.
truth: correct — each group's members issue its collective. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    g0 = dist.new_group([0])
    g1 = dist.new_group([1])
    pair = dist.new_group([0, 1])
    t = torch.ones(3) * (rank + 1)
    if rank == 0:
        dist.all_reduce(t, group=g0)
    if rank in (1,):
        dist.all_reduce(t, group=g1)
    if rank in [0, 1]:
        dist.all_reduce(t, group=pair)
    assert t.tolist() == [3.0, 3.0, 3.0], t
    print(f"rank {rank}: {t.tolist()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
