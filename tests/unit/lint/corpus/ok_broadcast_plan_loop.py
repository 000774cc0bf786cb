"""Rank 0 reads which parameters to average (its own file, a config); broadcast_object_list gives
every rank rank 0's list, then each rank loops over it (len() of it, a slice of it).

shape: b (made uniform by a collective) — `plan = ... if rank == 0 else None;
dist.broadcast_object_list(box, src=0); plan = box[0]; for name in plan[1:]: dist.all_reduce(...)`
and `for i in range(len(plan))`: the list is rank 0's on every rank after the broadcast.
truth: correct — every rank loops over the same list. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def read_plan() -> list[str]:
    return ["embed.weight", "layer.weight", "layer.bias"]


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    params = {"embed.weight": torch.ones(4) * rank, "layer.weight": torch.ones(3) * rank, "layer.bias": torch.ones(2)}
    plan = read_plan() if rank == 0 else None
    box = [plan]
    dist.broadcast_object_list(box, src=0)
    plan = box[0]
    for name in plan[1:]:
        dist.all_reduce(params[name])
    for i in range(len(plan)):
        dist.broadcast(params[plan[i]], src=0)
    print(f"rank {rank}: {[params[n].tolist() for n in plan]}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
