"""Torch's own test idiom (distributed_test.py's _test_broadcast_helper): for each source rank,
the source broadcasts the expected tensor and the others broadcast into a buffer; then both
branches of a role test all_gather, each with its own tensor.

shape: d (both branches issue the same collective) — `if rank == src: dist.broadcast(expected,
src) else: dist.broadcast(buffer, src)`; `if rank == 0: dist.all_gather(out, a) else:
dist.all_gather(out, b)`.
truth: correct — every rank issues one broadcast per source and one all_gather. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    for src in range(world):
        expected = torch.full((5,), float(src) + 0.25)
        if rank == src:
            dist.broadcast(expected, src)
        else:
            buffer = torch.empty(5)
            dist.broadcast(buffer, src)
            assert torch.equal(buffer, expected)
    out = [torch.empty(2) for _ in range(world)]
    if rank == 0:
        dist.all_gather(out, torch.zeros(2))
    else:
        dist.all_gather(out, torch.ones(2) * rank)
    print(f"rank {rank}: {[o.tolist() for o in out]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
