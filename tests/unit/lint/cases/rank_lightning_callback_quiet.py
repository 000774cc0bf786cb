"""The twin of rank_lightning_callback: rank 0 writes the file, every rank reaches the barrier."""
import torch
from lightning.pytorch import Callback


class SaveEmbeddings(Callback):
    def __init__(self, path: str):
        self.path = path

    def on_train_epoch_end(self, trainer, pl_module):
        if trainer.global_rank == 0:
            torch.save(pl_module.state_dict(), self.path)
        trainer.strategy.barrier()
