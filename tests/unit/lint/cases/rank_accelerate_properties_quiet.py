"""The twin of rank_accelerate_properties: the collectives run on every process, the main one only prints."""
import torch
from accelerate import Accelerator

accelerator = Accelerator()


def evaluate(model, loader):
    preds = []
    for batch in loader:
        with torch.no_grad():
            preds.append(model(batch["input"]).argmax(-1))
    preds = accelerator.gather(torch.cat(preds))
    accelerator.wait_for_everyone()
    total = accelerator.reduce(preds.float().sum(), reduction="sum")
    if accelerator.is_main_process:
        print(total)
    if accelerator.process_index == 0:
        accelerator.print(preds.shape)
    return preds
