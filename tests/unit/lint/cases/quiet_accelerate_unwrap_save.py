"""accelerate's documented save: every process waits and gathers the state; `is_main_process` is passed as an argument."""
from accelerate import Accelerator


def save(accelerator: Accelerator, model, tokenizer, output_dir: str) -> None:
    accelerator.wait_for_everyone()
    unwrapped = accelerator.unwrap_model(model)
    unwrapped.save_pretrained(output_dir, is_main_process=accelerator.is_main_process,
                              save_function=accelerator.save, state_dict=accelerator.get_state_dict(model))
    if accelerator.is_main_process:
        tokenizer.save_pretrained(output_dir)
