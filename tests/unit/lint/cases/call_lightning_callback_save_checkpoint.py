"""The classic Lightning hang: a Callback saving with `trainer.save_checkpoint` inside `if trainer.is_global_zero:`."""
from lightning.pytorch import Callback


class SaveBest(Callback):
    def __init__(self, monitor: str = "val_loss"):
        self.monitor = monitor
        self.best = float("inf")

    def on_validation_end(self, trainer, pl_module):
        current = trainer.callback_metrics[self.monitor].item()
        if current < self.best:
            self.best = current
            if trainer.is_global_zero:  # expect: branch a
                trainer.save_checkpoint(f"best-{trainer.current_epoch}.ckpt")  # expect: call a
