"""A Trainer-style compute_loss (transformers' trainer.py reads `inputs.get("return_loss")`): the
batch carries a flag set by the data collator, the same on every rank, and the loss is averaged
across ranks only when the flag asks for it.

shape: d (a flag read from the batch, uniform by construction) — `if batch.get("return_loss"):
dist.all_reduce(loss)`: the batch is this rank's data, its "return_loss" key is the collator's
setting.
truth: correct — every rank's batches carry the same flag. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def collate(rank: int, step: int, return_loss: bool) -> dict:
    g = torch.Generator().manual_seed(100 * rank + step)
    return {"x": torch.randn(4, 8, generator=g), "y": torch.randn(4, 1, generator=g), "return_loss": return_loss}


def compute_loss(model: torch.nn.Module, batch: dict) -> torch.Tensor | None:
    loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"]).detach()
    if batch.get("return_loss"):
        dist.all_reduce(loss)
        return loss / dist.get_world_size()
    return None


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    losses = [compute_loss(model, collate(rank, step, return_loss=step % 2 == 0)) for step in range(4)]
    print(f"rank {rank}: {[None if v is None else round(v.item(), 3) for v in losses]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
