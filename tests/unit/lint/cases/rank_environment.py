"""The rank read from the environment: `int(os.environ["RANK"])`, `os.environ.get("LOCAL_RANK")`, `os.getenv("RANK")`."""
import os

import torch
import torch.distributed as dist

RANK = int(os.environ["RANK"])
LOCAL_RANK = os.environ.get("LOCAL_RANK", "0")


def sync_weights(model: torch.nn.Module) -> None:
    if RANK == 0:  # expect: branch environ
        dist.broadcast(model.weight.data, src=0)  # expect: call environ


def prepare_data(root: str) -> None:
    if LOCAL_RANK == "0":  # expect: branch get
        os.makedirs(root, exist_ok=True)
        dist.barrier()  # expect: call get


def finish() -> None:
    if os.getenv("RANK", "0") == "0":  # expect: branch getenv
        print("done")
        dist.barrier()  # expect: call getenv
