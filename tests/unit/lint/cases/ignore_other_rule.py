"""An ignore comment for another rule (`# collcheck: ignore[other]`) does not silence the rank-branch finding."""
import torch.distributed as dist


def debug_sync(group) -> None:
    if dist.get_rank() == 0:  # expect: branch a
        dist.barrier(group=group)  # collcheck: ignore[unused-group]  # expect: call a
