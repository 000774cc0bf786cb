"""Seed 004, case 2: DDP with uneven inputs, no join(), no barrier."""
import datetime
import os
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_INPUTS = 5


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    # Rank 1 gets one more input than rank 0
    inputs = [torch.tensor([1]).float() for _ in range(NUM_INPUTS + rank)]
    num_inputs = 0

    for input in inputs:
        num_inputs += 1
        loss = model(input)
        loss.backward()  # collcheck: culprit
    print(f"Rank {rank} has exhausted all {num_inputs} of its inputs!", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

