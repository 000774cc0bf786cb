"""accelerate's `is_main_process`, `is_local_main_process` and `process_index` are rank-valued."""
import torch
from accelerate import Accelerator

accelerator = Accelerator()


def evaluate(model, loader):
    preds = []
    for batch in loader:
        with torch.no_grad():
            preds.append(model(batch["input"]).argmax(-1))
    preds = torch.cat(preds)
    if accelerator.is_main_process:  # expect: branch main
        preds = accelerator.gather(preds)  # expect: call main
    if accelerator.is_local_main_process:  # expect: branch local
        accelerator.wait_for_everyone()  # expect: call local
    if accelerator.process_index == 0:  # expect: branch index
        total = accelerator.reduce(preds.float().sum(), reduction="sum")  # expect: call index
        print(total)
    return preds
