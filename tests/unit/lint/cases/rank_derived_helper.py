"""A helper that returns a rank test (`def is_main(): return dist.get_rank() == 0`) used as `if is_main():`."""
import torch
import torch.distributed as dist


def is_main() -> bool:
    return dist.get_rank() == 0


def is_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def save(model: torch.nn.Module, path: str) -> None:
    if is_main():  # expect: branch a
        torch.save(model.state_dict(), path)
        dist.barrier()  # expect: call a
    if is_initialized():
        dist.barrier()
