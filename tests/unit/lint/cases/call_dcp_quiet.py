"""The twin of call_dcp: every rank saves (DCP writes each rank's shard), rank 0 only announces it."""
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_model_state_dict


def checkpoint(model, step: int, root: str) -> None:
    state = get_model_state_dict(model)
    dcp.save({"model": state}, checkpoint_id=f"{root}/step{step}")
    if dist.get_rank() == 0:
        print(f"saved step {step} to {root}")
