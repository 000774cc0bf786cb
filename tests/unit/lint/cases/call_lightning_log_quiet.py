"""The twin of call_lightning_log_sync_dist: without `sync_dist` the log is local, rank 0 alone may log it."""
import torch
import lightning.pytorch as pl


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(16, 1)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        if self.trainer.is_global_zero:
            self.log("val_loss_rank0", loss, rank_zero_only=True)
        self.log("val_loss", loss, sync_dist=True)
        return loss
