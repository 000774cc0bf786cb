"""Only rank 0 makes a logger; `if logger is not None:` is a rank test, as a value picked per rank."""
# expect: severity error
import torch.distributed as dist


class Logger:
    def log(self, t):
        dist.all_reduce(t)


def step(t):
    logger = Logger() if dist.get_rank() == 0 else None
    if logger is not None:  # expect: branch a
        logger.log(t)  # expect: call a
