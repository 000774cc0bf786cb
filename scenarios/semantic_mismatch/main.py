"""Bug: a user "early stop" all_reduce inside a DDP join() loop with uneven inputs.

Every rank all-reduces a 1-element stop flag after each step.  Rank 0 runs out of
inputs first and joins; join() shadows DDP's own collectives, not the user's flag.
Rank 1's extra flag all_reduce (float32, 1 element, SUM) is matched by rank 0's
join-internal all_reduce that counts non-joined ranks (also float32, 1 element, SUM):
shapes agree, meanings do not.  Rank 1 contributes 0 ("do not stop"), which rank 0
reads as "no rank is still training".  Fix: implement the flag as a Joinable, or
agree on the number of steps before the loop.
"""
import datetime
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_INPUTS = 3


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    inputs = [torch.tensor([1.0]) for _ in range(NUM_INPUTS + rank)]  # rank 1 has one more
    with model.join():
        for step, x in enumerate(inputs):
            model(x).sum().backward()
            stop = torch.zeros(1)
            if model.module.weight.grad.abs().item() > 1e3:  # local divergence check
                stop.fill_(1.0)
            dist.all_reduce(stop)  # collcheck: culprit
            if stop.item() > 0:
                break
    print(f"rank {rank}: left the join loop after {step + 1} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
