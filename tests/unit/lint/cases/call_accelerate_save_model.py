"""`accelerator.save_model(...)` gathers a sharded model's state: on the main process alone it hangs."""
from accelerate import Accelerator


def finish(model, optimizer, output_dir: str) -> None:
    accelerator = Accelerator()
    model, optimizer = accelerator.prepare(model, optimizer)
    if accelerator.is_main_process:  # expect: branch a
        accelerator.save_model(model, output_dir)  # expect: call a
