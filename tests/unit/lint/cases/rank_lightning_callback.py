"""`trainer.global_rank` in a Lightning Callback hook: rank 0 alone syncs through the strategy."""
import torch
from lightning.pytorch import Callback


class SaveEmbeddings(Callback):
    def __init__(self, path: str):
        self.path = path

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.global_rank == 0:  # expect: branch a
            torch.save(pl_module.state_dict(), self.path)
            trainer.strategy.barrier()  # expect: call a
