"""RPC role dispatch: the master starts the trainers' work over `rpc.remote`, so the trainers' arm has
no collective of its own though they do create the group. Lint cannot place RPC work on ranks: the
other arms' collectives are warnings, not errors."""
# expect: severity warning
import torch.distributed as dist
import torch.distributed.rpc as rpc

TRAINERS = [0, 1]
REMOTE = 2
MASTER = 3


class Trainer:
    def __init__(self):
        self.group = dist.new_group(TRAINERS)


def master():
    for r in TRAINERS:
        rpc.remote(f"worker{r}", Trainer)
    dist.new_group(TRAINERS)


def remote_worker():
    dist.new_group(TRAINERS)


def main(rank):
    if rank == MASTER:
        master()
    elif rank == REMOTE:  # expect: branch a
        remote_worker()  # expect: call a
    elif rank in TRAINERS:
        pass  # new_group runs in Trainer.__init__, started by the master over RPC
