"""The collective two functions down: `if rank == 0: save()`, `save()` calls `write()`, `write()` enters a barrier."""
import torch
import torch.distributed as dist


def write(state: dict, path: str) -> None:
    torch.save(state, path)
    dist.barrier()  # expect: chain a


def save(model: torch.nn.Module, path: str) -> None:
    state = model.state_dict()
    write(state, path)  # expect: chain a


def main(model: torch.nn.Module) -> None:
    rank = dist.get_rank()
    if rank == 0:  # expect: branch a
        save(model, "model.pt")  # expect: call a
