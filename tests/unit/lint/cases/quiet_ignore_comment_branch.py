"""`# collcheck: ignore[rank-branch]` on the branch line silences every finding under that branch."""
import torch.distributed as dist


def debug_sync(group) -> None:
    if dist.get_rank() == 0:  # collcheck: ignore[rank-branch]
        dist.barrier(group=group)
        dist.barrier()
