"""A LightningModule trained with DDP on 2 gloo ranks: the epoch-end hook that gathers every
rank's predictions for a report is decorated @rank_zero_only (only rank 0 writes the report),
but self.all_gather inside it is a collective.

shape: a function decorated to run on rank 0 only, issuing a framework collective —
`@rank_zero_only def on_train_epoch_end(self): self.all_gather(...)`.
truth: buggy — rank 0's all_gather meets rank 1's next epoch (or its end-of-fit barrier).
expected lint target: bug_lightning_rank_zero_gather.py:36 (the call, marker @bug) in the function
decorated at line 34 (marker @cond).
"""
import datetime
import os

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities import rank_zero_only

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)
        self.preds = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        out = self.layer(x)
        self.preds.append(out.detach().squeeze(1))
        return torch.nn.functional.mse_loss(out, y)

    @rank_zero_only  # @cond
    def on_train_epoch_end(self):
        everything = self.all_gather(torch.cat(self.preds))  # @bug
        print(f"epoch {self.current_epoch}: {everything.numel()} predictions")
        self.preds.clear()

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


if __name__ == "__main__":
    main()
