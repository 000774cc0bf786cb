"""An FSDP model's full `state_dict()` and `FSDP.summon_full_params` all-gather: rank 0 alone calling them hangs."""
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def save(model: torch.nn.Module, path: str) -> None:
    model = FSDP(model)
    if dist.get_rank() == 0:  # expect: branch state
        state = model.state_dict()  # expect: call state
        torch.save(state, path)
    if dist.get_rank() == 0:  # expect: branch summon
        with FSDP.summon_full_params(model):  # expect: call summon
            print(sum(p.numel() for p in model.parameters()))
