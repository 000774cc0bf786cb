"""accelerate's own `main_process_first`: the others wait before, the main process after; one barrier each."""
import torch.distributed as dist


def goes_first(is_main: bool):
    if not is_main:
        dist.barrier()
    yield
    if is_main:
        dist.barrier()


def setup():
    yield from goes_first(dist.get_rank() == 0)
