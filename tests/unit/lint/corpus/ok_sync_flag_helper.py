"""A user's summary helper reduces its tensor across ranks only when asked (`sync=True`): every
rank calls it with sync=True for the epoch's mean loss, and rank 0 alone calls it with sync=False
to print its own local loss.

shape: c (a call that issues collectives only in some configurations) — `def summarize(t, sync):
if sync: dist.all_reduce(t)`; `if rank == 0: print(summarize(local, sync=False))`: the call
under the rank condition never reaches the collective.
truth: correct — the only all_reduce runs on every rank. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def summarize(values: torch.Tensor, sync: bool) -> float:
    total = torch.stack([values.sum(), torch.tensor(float(values.numel()))])
    if sync:
        dist.all_reduce(total)
    return (total[0] / total[1]).item()


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    losses = torch.rand(5) + rank
    mean = summarize(losses, sync=True)
    if rank == 0:
        print(f"rank 0: local {summarize(losses, sync=False):.3f}, global {mean:.3f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
