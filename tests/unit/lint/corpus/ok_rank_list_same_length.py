"""Torch's own test idiom (distributed_test.py's sparse all_reduce tests): a list of test cases
built from the rank, whose values differ per rank but whose length does not, then one all_reduce
per case.

shape: d (a rank-valued list of the same length everywhere) — `cases = [(rank + 1) * k for k
in range(3)]; for value in cases: dist.all_reduce(torch.tensor(value))`.
truth: correct — every rank loops 3 times. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def cases_for(rank: int, world: int) -> list[tuple[float, float]]:
    """(this rank's input, the expected sum) per case: the same number of cases on every rank."""
    return [((rank + 1) * k, k * world * (world + 1) / 2) for k in range(3)]


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    for value, expected in cases_for(rank, world):
        t = torch.tensor([float(value)])
        dist.all_reduce(t)
        assert t.item() == expected, (t, expected)
    print(f"rank {rank}: 3 cases passed")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
