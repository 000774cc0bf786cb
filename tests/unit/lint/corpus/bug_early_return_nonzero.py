"""Plain torch.distributed: a checkpoint helper that returns at once on every rank but 0, then,
on rank 0, writes the file and waits at a barrier "until the file is written".

shape: early exit on a rank condition before a collective — `if dist.get_rank() != 0: return`
... `dist.barrier()` later in the same function.
truth: buggy — rank 0's barrier meets rank 1's next gradient all_reduce.
expected lint target: bug_early_return_nonzero.py:24 (the call, marker @bug) after the early exit at
line 21 (marker @cond).
"""
import datetime
import os
import tempfile

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def save_checkpoint(model: torch.nn.Module, path: str) -> None:
    if dist.get_rank() != 0:  # @cond
        return
    torch.save(model.state_dict(), path)
    dist.barrier()  # @bug
    os.remove(path)


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    folder = os.environ.get("CORPUS_OUT") or tempfile.gettempdir()
    for step in range(3):
        model(torch.randn(16, 8)).square().mean().backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        model.zero_grad()
        if step == 1:
            save_checkpoint(model, os.path.join(folder, f"bug_early_return-{os.environ.get('MASTER_PORT', '0')}.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
