"""A LightningModule trained with DDP on 2 gloo ranks: the training loss is logged with
sync_dist=True on every rank, and the learning rate only on global rank zero with
rank_zero_only=True (no reduction: Lightning never syncs it).

shape: c (a framework call that issues collectives only in some configurations) — `if
self.trainer.is_global_zero: self.log("lr", ..., rank_zero_only=True)`; self.log with
sync_dist=True would reduce, with rank_zero_only=True it does not.
truth: correct — the only synced metric is logged on every rank. Exits 0.
"""
import datetime
import os

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)
        if self.trainer.is_global_zero:
            self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"], rank_zero_only=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    torch.manual_seed(0)
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, strategy=DDPStrategy(process_group_backend="gloo", timeout=TIMEOUT),
        max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0)
    data = torch.utils.data.TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
    trainer.fit(Regressor(), train_dataloaders=torch.utils.data.DataLoader(data, batch_size=4))
    print(f"rank {trainer.global_rank}: done, loss {trainer.callback_metrics['train_loss'].item():.4f}")


if __name__ == "__main__":
    main()
