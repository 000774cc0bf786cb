"""Bug: broadcast with a src each rank computed from its own, unsynchronised data.

"Broadcast the best checkpoint from the rank that found it": every rank picks the source
from its local validation loss and believes it is the best, so rank 0 broadcasts with
src=0 while rank 1 broadcasts with src=1.  The fix is to agree on src first (all_reduce
MIN of the losses, or all_gather them).
"""
import datetime
import os
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(rank)
    weights = torch.randn(32)
    my_val_loss = 0.5 + 0.1 * rank
    best_seen = {rank: my_val_loss}  # only the local result is known
    best_rank = min(best_seen, key=best_seen.get)
    dist.broadcast(weights, src=best_rank)  # collcheck: culprit
    print(f"rank {rank}: took weights from rank {best_rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
