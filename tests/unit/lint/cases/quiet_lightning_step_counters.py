"""Step counters are the same on every rank: `batch_idx % 100`, `self.global_step % k` may guard a synced log."""
import torch
import lightning.pytorch as pl


class LitLM(pl.LightningModule):
    def __init__(self, log_every: int = 50):
        super().__init__()
        self.net = torch.nn.Linear(64, 64)
        self.log_every = log_every

    def training_step(self, batch, batch_idx):
        loss = self.net(batch).pow(2).mean()
        if batch_idx % 100 == 0:
            self.log("train_loss", loss, sync_dist=True)
        if self.global_step % self.log_every == 0:
            norm = torch.stack([p.detach().norm() for p in self.parameters()]).norm()
            self.log("param_norm", norm, sync_dist=True)
        return loss
