"""An accelerate training loop (DDP on 2 gloo ranks, CPU): 3 steps on each process's own
batches, an evaluation report written by blame_accelerate_report.write_report (a module next to
this one, which gathers every process's errors), then wait_for_everyone() (argv[1] picks the
case, argv[2] is the report's folder).

bug: the report is written only `if accelerator.is_local_main_process:` (the condition is in
this file, the gather in blame_accelerate_report.py). World group: DDP's set-up (slots 0-2), the
3 steps' gradient all-reduces and step 1's bucket-rebuild broadcasts (slots 3-7). Rank 0 (local
rank 0) takes the branch and issues the report's all-gather at slot 8, an extra collective,
while rank 1 goes on to wait_for_everyone()'s barrier at slot 8 (gloo: a mismatch or the group
timeout).

ok: every process writes the report (write_report writes the file from the main process only).

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import blame_accelerate_report as report
import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs


def batches(rank: int, n: int, seed: int):
    g = torch.Generator().manual_seed(seed + rank)
    return [(torch.randn(4, 8, generator=g), torch.randn(4, 1, generator=g)) for _ in range(n)]


def main(case: str, folder: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timeout)])
    rank = accelerator.process_index
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer = accelerator.prepare(model, optimizer)
    for x, y in batches(rank, 3, 0):
        accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
    path = os.path.join(folder, "report.txt")
    val = batches(rank, 2, 100)
    if case == "ok":
        report.write_report(accelerator, model, val, path)
    elif accelerator.is_local_main_process:  # @cond
        report.write_report(accelerator, model, val, path)  # @report_call
    accelerator.wait_for_everyone()  # @wait
    accelerator.end_training()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
