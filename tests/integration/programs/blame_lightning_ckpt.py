"""Lightning (DDP on 2 gloo ranks, CPU): 2 epochs of 3 steps of a LightningModule, and a callback
that saves a checkpoint at each training epoch's end (argv[1] picks the case, argv[2] is the
checkpoint folder).

bug: the callback's hook is decorated with `@rank_zero_only` (only one process should write the
file), but trainer.save_checkpoint must run on every rank: it ends in the strategy's barrier.
World group: Lightning's and DDP's set-up (slots 0-13: the log folder's broadcast, barriers,
DDP's 3, the dataloader length reductions), then each step the SIGTERM-flag broadcast and DDP's
gradient all-reduce (step 1 also DDP's 2 bucket-rebuild broadcasts): epoch 0 is slots 14-21.
Rank 0 runs the hook at the end of epoch 0 and issues that barrier at slot 22, an extra
collective, while rank 1 skips the hook and starts epoch 1 (its SIGTERM-flag broadcast, slot
22). Both ranks' innermost line of this program there: rank 0's save_checkpoint in the hook,
rank 1's trainer.fit.

ok: the hook runs on every rank (Lightning writes the file from rank 0 only).

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities import rank_zero_only


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class SaveEachEpoch(pl.Callback):
    def __init__(self, folder: str):
        self.folder = folder

    def path(self, trainer) -> str:
        return os.path.join(self.folder, f"epoch-{trainer.current_epoch}.ckpt")

    def on_train_epoch_end(self, trainer, pl_module):
        trainer.save_checkpoint(self.path(trainer))  # every rank: Lightning writes from rank 0


class SaveEachEpochFromRankZero(SaveEachEpoch):
    @rank_zero_only  # @cond
    def on_train_epoch_end(self, trainer, pl_module):
        trainer.save_checkpoint(self.path(trainer))  # @save


def main(case: str, folder: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(24, 8), torch.randn(24, 1))
    saver = SaveEachEpoch(folder) if case == "ok" else SaveEachEpochFromRankZero(folder)
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, strategy=DDPStrategy(process_group_backend="gloo", timeout=timeout),
        max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0, callbacks=[saver])
    trainer.fit(Regressor(), train_dataloaders=torch.utils.data.DataLoader(data, batch_size=4))  # @fit


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
