"""FSDP's optimizer-state idiom (torch/distributed/fsdp/_optim_utils.py), in a user's class: rank 0
fills the list of state keys on the object, broadcast_object_list makes the attribute rank 0's on
every rank, and every rank loops over it with one broadcast per key.

shape: b (made uniform by a collective, through an attribute) — `if self.rank == 0: self.keys =
sorted(state)`; `dist.broadcast_object_list(box, src=0); self.keys = box[0]`; `for key in
self.keys: dist.broadcast(...)`.
truth: correct — every rank loops over rank 0's keys. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


class StateSharer:
    def __init__(self, rank: int):
        self.rank = rank
        self.keys: list[str] = []

    def share(self, state: dict) -> dict:
        if self.rank == 0:
            self.keys = sorted(state)
        box = [self.keys]
        dist.broadcast_object_list(box, src=0)
        self.keys = box[0]
        shared = {}
        for key in self.keys:
            value = state[key].clone() if self.rank == 0 else torch.empty(4)
            dist.broadcast(value, src=0)
            shared[key] = value
        return shared


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    state = {"exp_avg": torch.ones(4), "exp_avg_sq": torch.full((4,), 2.0), "step": torch.full((4,), 3.0)}
    shared = StateSharer(rank).share(state if rank == 0 else {})
    assert sorted(shared) == sorted(state) and torch.equal(shared["step"], state["step"])
    print(f"rank {rank}: {sorted(shared)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
