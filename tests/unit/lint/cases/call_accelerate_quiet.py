"""The twin of call_accelerate: every process gathers, waits and saves; the main process only prints."""
import torch
from accelerate import Accelerator


def main(model, optimizer, train_loader, eval_loader, output_dir: str):
    accelerator = Accelerator()
    model, optimizer, train_loader, eval_loader = accelerator.prepare(model, optimizer, train_loader, eval_loader)
    correct = 0
    for batch in eval_loader:
        with torch.no_grad():
            preds = model(batch["input_ids"]).argmax(-1)
        preds, labels = accelerator.gather_for_metrics((preds, batch["labels"]))
        correct += (preds == labels).sum().item()
    accelerator.wait_for_everyone()
    accelerator.save_state(output_dir)
    if accelerator.is_main_process:
        print(f"correct {correct}")
