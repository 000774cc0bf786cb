"""An accelerate training loop (DDP on 2 gloo ranks, CPU): the main process alone saves the
unwrapped model's weights with accelerator.save (a torch.save on the main process, no
collective), and every process waits for the file outside the branch.

shape: c (a framework call that is not collective, under is_main_process) — `if
accelerator.is_main_process: accelerator.save(unwrapped.state_dict(), path)`, then
`accelerator.wait_for_everyone()` on every rank.
truth: correct — the barrier runs everywhere. Exits 0.
"""
import datetime
import os
import tempfile

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
    for _ in range(3):
        loss = model(torch.randn(4, 8)).square().mean()
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    folder = os.environ.get("CORPUS_OUT") or tempfile.gettempdir()
    path = os.path.join(folder, f"ok_accelerate_main_save-{os.environ.get('MASTER_PORT', '0')}.pt")
    if accelerator.is_main_process:
        accelerator.save(accelerator.unwrap_model(model).state_dict(), path)
    accelerator.wait_for_everyone()
    weights = torch.load(path)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        os.remove(path)
    accelerator.print(f"saved and read back {sorted(weights)}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
