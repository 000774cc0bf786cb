"""`@accelerator.on_main_process` runs the function on the main process alone; it waits for the others."""
from accelerate import Accelerator

accelerator = Accelerator()


@accelerator.on_main_process  # expect: branch a
def push_checkpoint(output_dir: str) -> None:
    accelerator.wait_for_everyone()  # expect: call a
    print(f"uploading {output_dir}")


def train(model, optimizer, loader):
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    push_checkpoint("out")
