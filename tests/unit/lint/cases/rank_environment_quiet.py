"""Environment variables other than the rank are the same on every rank: WORLD_SIZE, MASTER_PORT, a debug flag."""
import os

import torch
import torch.distributed as dist

WORLD_SIZE = int(os.environ["WORLD_SIZE"])
DEBUG = os.environ.get("TRAIN_DEBUG", "0") == "1"


def sync_weights(model: torch.nn.Module) -> None:
    if WORLD_SIZE > 1:
        dist.broadcast(model.weight.data, src=0)


def check() -> None:
    if DEBUG or os.getenv("MASTER_PORT") == "29500":
        dist.barrier()
