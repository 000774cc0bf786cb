"""The helper module of interproc_across_files: `checkpoint()` calls a function whose barrier all ranks must reach."""
import torch
import torch.distributed as dist


def _flush(path: str) -> None:
    dist.barrier()  # expect: chain a
    print(f"flushed {path}")


def checkpoint(model: torch.nn.Module, path: str) -> None:
    torch.save(model.state_dict(), path)
    _flush(path)  # expect: chain a
