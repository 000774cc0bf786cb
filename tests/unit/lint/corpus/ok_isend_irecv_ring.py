"""A ring exchange (a halo swap) with non-blocking point-to-point: each rank posts an irecv from
its left and an isend to its right, then waits for both; a second round goes through
batch_isend_irecv.

shape: d (isend/irecv pairs) — every rank posts both halves before waiting; no rank test.
truth: correct — the operations pair whatever the order. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world, (rank - 1) % world
    send, recv = torch.full((1024,), float(rank)), torch.empty(1024)
    works = [dist.irecv(recv, src=left), dist.isend(send, dst=right)]
    for work in works:
        work.wait()
    assert recv[0].item() == left
    ops = [dist.P2POp(dist.isend, send * 2, right), dist.P2POp(dist.irecv, recv, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    assert recv[0].item() == 2 * left
    print(f"rank {rank}: got {recv[0].item()} from {left}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
