"""Rank 0 alone prints, logs and writes the checkpoint (torch.save), then every rank meets at a
barrier outside the branch before reading it back.

shape: d (rank-0-only work with no collective inside) — `if rank == 0: print(...);
logging.info(...); torch.save(...)`, `dist.barrier()` after the branch.
truth: correct — the barrier runs on every rank. Exits 0.
"""
import datetime
import logging
import os
import tempfile

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    folder = os.environ.get("CORPUS_OUT") or tempfile.gettempdir()
    path = os.path.join(folder, f"ok_rank0_save_then_barrier-{os.environ.get('MASTER_PORT', '0')}.pt")
    if rank == 0:
        print("rank 0: saving")
        logging.getLogger(__name__).info("checkpoint at %s", path)
        torch.save(model.state_dict(), path)
    dist.barrier()
    state = torch.load(path)
    dist.barrier()
    if rank == 0:
        os.remove(path)
    print(f"rank {rank}: read {sorted(state)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
