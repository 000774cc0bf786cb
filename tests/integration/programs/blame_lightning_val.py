"""Lightning (DDP on 2 gloo ranks, CPU): 2 epochs of 3 training steps, each followed by a
validation epoch of 2 batches per rank whose absolute errors the module keeps for a report
(argv[1] picks the case).

bug: on_validation_epoch_end gathers every rank's errors with self.all_gather inside `if
self.trainer.is_global_zero:` (only the main process prints the report). World group: Lightning's and DDP's set-up
(slots 0-16: the log folder's broadcast, barriers, DDP's 3, the train and val dataloaders'
length reductions), epoch 0's 3 steps (17-24: each the SIGTERM-flag broadcast and DDP's
gradient all-reduce, step 1 also 2 bucket-rebuild broadcasts); the validation itself issues
none. Rank 0 takes the branch after epoch 0's validation and issues the all-gather at slot 25,
an extra collective, while rank 1 leaves the hook and starts epoch 1 (its SIGTERM-flag
broadcast, slot 25; its innermost line of this program: trainer.fit).

ok: every rank gathers; rank 0 prints.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy


class Regressor(pl.LightningModule):
    def __init__(self, case: str):
        super().__init__()
        self.case = case
        self.layer = torch.nn.Linear(8, 1)
        self.errors = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.errors.append((self.layer(x) - y).abs().flatten())

    def on_validation_epoch_end(self):
        errors = torch.cat(self.errors)
        self.errors.clear()
        if self.case == "ok":
            everything = self.all_gather(errors)
            if self.trainer.is_global_zero:
                print(f"epoch {self.current_epoch}: mean abs error {everything.mean().item():.4f}")
        elif self.trainer.is_global_zero:  # @cond
            everything = self.all_gather(errors)  # @gather
            print(f"epoch {self.current_epoch}: mean abs error {everything.mean().item():.4f}")

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader(n: int, seed: int) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(seed)
    data = torch.utils.data.TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g))
    return torch.utils.data.DataLoader(data, batch_size=4)


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    torch.manual_seed(0)
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, strategy=DDPStrategy(process_group_backend="gloo", timeout=timeout),
        max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(Regressor(case), train_dataloaders=loader(24, 0), val_dataloaders=loader(16, 1))  # @fit


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
