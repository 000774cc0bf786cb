"""The helper module of rank_helper_across_files: a rank test returned from a function in another file."""
import torch.distributed as dist


def is_main_process() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0
