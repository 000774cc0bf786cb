"""accelerate's collective APIs on the main process alone: `wait_for_everyone`, `gather_for_metrics`, `save_state`."""
import torch
from accelerate import Accelerator


def main(model, optimizer, train_loader, eval_loader, output_dir: str):
    accelerator = Accelerator()
    model, optimizer, train_loader, eval_loader = accelerator.prepare(model, optimizer, train_loader, eval_loader)
    for batch in eval_loader:
        with torch.no_grad():
            preds = model(batch["input_ids"]).argmax(-1)
        if accelerator.is_main_process:  # expect: branch gather
            preds = accelerator.gather_for_metrics(preds)  # expect: call gather
    if accelerator.is_main_process:  # expect: branch wait
        accelerator.wait_for_everyone()  # expect: call wait
    if accelerator.is_main_process:  # expect: branch save
        accelerator.save_state(output_dir)  # expect: call save
