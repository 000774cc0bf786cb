"""`# collcheck: ignore[rank-branch]` on the call line silences the finding there."""
import torch.distributed as dist


def debug_sync(group) -> None:
    if dist.get_rank() == 0:
        dist.barrier(group=group)  # collcheck: ignore[rank-branch]
