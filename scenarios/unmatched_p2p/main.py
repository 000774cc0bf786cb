"""Bug: a 3-stage pipeline where stage 1 computes its upstream peer wrongly.

Rank 0 sends activations to rank 1, but rank 1 receives from (rank + 1) % world, i.e.
rank 2, which never sends; the send and both receives are left unmatched.  The typical
off-by-one in hand-written pipeline/ring code (prev = rank - 1, next = rank + 1).
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    stage = torch.nn.Linear(8, 8)
    prev_stage = (rank + 1) % world  # bug: should be rank - 1
    act = torch.empty(2, 8)
    if rank == 0:
        act = stage(torch.randn(2, 8)).detach()
        dist.send(act, dst=1)  # collcheck: culprit
    elif rank == 1:
        dist.recv(act, src=prev_stage)  # collcheck: culprit
        act = stage(act).detach()
        dist.send(act, dst=2)
    else:
        dist.recv(act, src=1)
    print(f"rank {rank}: activation norm {act.norm().item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
