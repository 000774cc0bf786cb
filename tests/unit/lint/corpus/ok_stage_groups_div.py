"""A pipeline split into stages of `per_stage` consecutive ranks (`rank // per_stage`), one group
per stage; the last stage computes the loss and averages it over its own group (2 gloo ranks,
one rank per stage: stage groups [0] and [1]).

shape: a (group members, arithmetic) — `stage_groups = [dist.new_group(...) for s in ...]`,
`my_stage = rank // per_stage`, `if my_stage == stages - 1: dist.all_reduce(loss,
group=stage_groups[my_stage])`: the condition lets through exactly the members of the group
chosen by the same arithmetic.
truth: correct — every member of the last stage's group issues the all_reduce; the final
broadcast from the last stage runs on every rank. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    per_stage = 1
    stages = world // per_stage
    stage_groups = [dist.new_group(list(range(s * per_stage, (s + 1) * per_stage))) for s in range(stages)]
    my_stage = rank // per_stage
    loss = torch.tensor([0.0])
    if my_stage == stages - 1:
        loss = torch.tensor([float(rank) + 0.5])
        dist.all_reduce(loss, group=stage_groups[my_stage])
        loss /= per_stage
    dist.broadcast(loss, src=world - 1)
    assert loss.item() == world - 1 + 0.5, loss
    print(f"rank {rank} (stage {my_stage}): loss {loss.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
