"""`self.all_gather(...)` of a LightningModule is collective: gathering on global rank 0 alone hangs."""
import torch
import lightning.pytorch as pl


class Embedder(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Linear(128, 32)
        self.outputs = []

    def validation_step(self, batch, batch_idx):
        self.outputs.append(self.encoder(batch))

    def on_validation_epoch_end(self):
        local = torch.cat(self.outputs)
        if self.global_rank == 0:  # expect: branch a
            everything = self.all_gather(local)  # expect: call a
            torch.save(everything, "embeddings.pt")
        self.outputs.clear()
