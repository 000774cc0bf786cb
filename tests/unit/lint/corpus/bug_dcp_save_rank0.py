"""torch.distributed.checkpoint on 2 gloo ranks: a user's checkpoint helper wraps dcp.save, and
the training loop calls it on rank 0 only (the torch.save habit). DCP plans the checkpoint with
collectives over the whole group.

shape: a call of the program's own function that reaches a library collective, under `if rank
== 0` — `if rank == 0: checkpoint(model, folder)` with `checkpoint` calling `dcp.save`.
truth: buggy — rank 0 waits in DCP's planning collectives while rank 1 goes on to the next
step's all_reduce.
expected lint target: bug_dcp_save_rank0.py:41 (the call, marker @bug) under the condition at line
40 (marker @cond).
"""
import datetime
import os
import shutil
import tempfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def checkpoint(model: torch.nn.Module, folder: str) -> None:
    dcp.save({"model": model.state_dict()}, checkpoint_id=folder)


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    folder = os.path.join(os.environ.get("CORPUS_OUT") or tempfile.gettempdir(),
                          f"bug_dcp_save_rank0-{os.environ.get('MASTER_PORT', '0')}")
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    for step in range(3):
        model(torch.randn(4, 8)).pow(2).mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        model.zero_grad()
        if step == 1 and rank == 0:  # @cond
            checkpoint(model, folder)  # @bug
    dist.barrier()
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
