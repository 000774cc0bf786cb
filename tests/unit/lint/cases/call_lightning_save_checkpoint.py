"""`trainer.save_checkpoint(path)` inside `if trainer.is_global_zero:`: Lightning's own barrier waits for the others."""
import lightning.pytorch as pl


def fit_and_save(model: pl.LightningModule, datamodule: pl.LightningDataModule) -> None:
    trainer = pl.Trainer(accelerator="gpu", devices=4, strategy="ddp", max_epochs=3)
    trainer.fit(model, datamodule=datamodule)
    if trainer.is_global_zero:  # expect: branch a
        trainer.save_checkpoint("final.ckpt")  # expect: call a
