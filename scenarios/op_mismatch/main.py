"""Bug: at the same point rank 0 all-reduces the statistics while rank 1 expects a broadcast.

Two ranks disagree on how normalisation statistics are synchronised: rank 0 (which
reads the config) averages them with all_reduce, the other rank takes rank 0's copy
with broadcast.  Same tensor, same shape, different collective.
"""
import datetime
import os
import torch
import torch.distributed as dist


def load_config(rank):
    # only rank 0 reads the config file; the other ranks fall back to the default
    return {"stats_sync": "average"} if rank == 0 else {"stats_sync": "from_rank0"}


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    cfg = load_config(rank)
    torch.manual_seed(rank)
    running_mean = torch.randn(16)
    if cfg["stats_sync"] == "average":
        dist.all_reduce(running_mean)  # collcheck: culprit
        running_mean /= dist.get_world_size()
    else:
        dist.broadcast(running_mean, src=0)  # collcheck: culprit
    print(f"rank {rank}: running_mean[:3] = {running_mean[:3].tolist()}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
