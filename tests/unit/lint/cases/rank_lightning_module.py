"""Lightning's `self.trainer.is_global_zero`, `self.global_rank` and `self.local_rank` in a LightningModule."""
import torch
import torch.distributed as dist
import lightning.pytorch as pl


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(32, 10)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def on_train_epoch_end(self):
        if self.trainer.is_global_zero:  # expect: branch zero
            self.trainer.strategy.barrier()  # expect: call zero

    def on_validation_epoch_end(self):
        if self.global_rank == 0:  # expect: branch global
            dist.barrier()  # expect: call global

    def on_test_epoch_end(self):
        if self.local_rank == 0:  # expect: branch local
            self.trainer.strategy.barrier()  # expect: call local

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)
