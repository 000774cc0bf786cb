"""accelerate through an attribute (`self.accelerator`): the main-process branch around `wait_for_everyone()`."""
from accelerate import Accelerator


class Pipeline:
    def __init__(self, model):
        self.accelerator = Accelerator(mixed_precision="bf16")
        self.model = self.accelerator.prepare(model)

    def export(self, path: str) -> None:
        if self.accelerator.is_main_process:  # expect: branch a
            self.accelerator.wait_for_everyone()  # expect: call a
            self.accelerator.save(self.accelerator.unwrap_model(self.model).state_dict(), path)
