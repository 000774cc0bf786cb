"""Rank 0 printing, logging and `torch.save`-ing alone issues no collective."""
import logging

import torch
import torch.distributed as dist

log = logging.getLogger(__name__)


def end_of_epoch(model: torch.nn.Module, epoch: int, loss: torch.Tensor) -> None:
    dist.all_reduce(loss)
    if dist.get_rank() == 0:
        print(f"epoch {epoch}: {loss.item():.4f}")
        log.info("saving epoch %d", epoch)
        torch.save(model.state_dict(), f"epoch{epoch}.pt")
