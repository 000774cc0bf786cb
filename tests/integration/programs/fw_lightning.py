"""A LightningModule trained with DDP on 2 gloo ranks (argv[1] picks the case).

metric_rank0: on_train_epoch_end logs the epoch's wall time with sync_dist=True on rank 0 only
(`if self.global_rank == 0`). self.log only stores the value: at the epoch's end the fit loop
reduces every logged metric across ranks (a barrier and an all-reduce each), train_loss on both
ranks, then epoch_time_s on rank 0 alone, while rank 1 goes on to the next epoch.

uneven: no distributed sampler; each rank builds its own dataset, rank 0's one sample (so one
batch) longer than rank 1's: rank 0 trains a 4th step (Lightning's SIGTERM-flag broadcast, DDP's
gradient all-reduce) while rank 1, after 3, reduces the epoch's train_loss (sync_dist=True).

ok: the same training, every rank alike.

The job's group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang of the bugs.
"""

import datetime
import os
import sys
import time

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import DDPStrategy

BATCH = 4


class Regressor(pl.LightningModule):
    def __init__(self, case: str):
        super().__init__()
        self.case = case
        self.layer = torch.nn.Linear(8, 1)
        self.epoch_started = time.monotonic()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True, sync_dist=True)  # reduced at the epoch's end
        return loss

    def on_train_epoch_start(self):
        self.epoch_started = time.monotonic()

    def on_train_epoch_end(self):
        if self.case == "metric_rank0" and self.global_rank == 0:  # only rank 0 reports the epoch time
            self.log("epoch_time_s", time.monotonic() - self.epoch_started, sync_dist=True)  # @log_sync

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def dataset(rank: int, case: str) -> torch.utils.data.TensorDataset:
    """This rank's own shard: 3 batches, and one sample more on rank 0 in the uneven case."""
    n = 3 * BATCH + (1 if case == "uneven" and rank == 0 else 0)
    g = torch.Generator().manual_seed(rank)
    return torch.utils.data.TensorDataset(torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g))


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    trainer = pl.Trainer(
        accelerator="cpu", devices=2, strategy=DDPStrategy(process_group_backend="gloo", timeout=timeout),
        max_epochs=2, use_distributed_sampler=False, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)
    loader = torch.utils.data.DataLoader(dataset(rank, case), batch_size=BATCH)
    trainer.fit(Regressor(case), train_dataloaders=loader)  # @fit


if __name__ == "__main__":
    main(sys.argv[1])  # @main
