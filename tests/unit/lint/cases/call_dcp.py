"""Distributed checkpointing is collective: `dcp.save(...)` and `get_model_state_dict(model)` on rank 0 alone hang."""
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict


def checkpoint(model, step: int, root: str) -> None:
    if dist.get_rank() == 0:  # expect: branch save
        dcp.save({"model": model.state_dict()}, checkpoint_id=f"{root}/step{step}")  # expect: call save
    if dist.get_rank() == 0:  # expect: branch state
        state = get_model_state_dict(model)  # expect: call state
        print(len(state))
