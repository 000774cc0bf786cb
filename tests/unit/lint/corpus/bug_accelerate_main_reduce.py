"""An accelerate training loop (DDP on 2 gloo ranks, CPU): the epoch's summed loss is reduced
across processes for the log line, but only inside `if accelerator.is_main_process:`.

shape: rank-dependent branch (accelerate's is_main_process) around a framework collective —
`if accelerator.is_main_process: accelerator.reduce(total, reduction="sum")`.
truth: buggy — the main process's all_reduce meets the other's wait_for_everyone().
expected lint target: bug_accelerate_main_reduce.py:34 (the call, marker @bug) under the condition
at line 33 (marker @cond).
"""
import datetime
import os

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=TIMEOUT)])
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, optimizer)
    total = torch.zeros(1)
    for _ in range(3):
        loss = model(torch.randn(4, 8)).square().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        total += loss.detach()
    if accelerator.is_main_process:  # @cond
        total = accelerator.reduce(total, reduction="sum")  # @bug
        print(f"summed loss {total.item():.4f}")
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
