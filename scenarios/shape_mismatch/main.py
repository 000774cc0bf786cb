"""Bug: all_gather of per-batch predictions when the last batch is smaller on one rank.

Evaluation shards of 10 and 9 samples with batch size 4: the last batch has 2 samples on
rank 0 and 1 on rank 1, and all_gather needs the same shape on every rank (the common fix
is to pad to the max size, or use all_gather_object / DistributedSampler with padding).
"""
import datetime
import os
import torch
import torch.distributed as dist

BATCH = 4


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    n_samples = 10 - rank  # uneven split of the validation set
    data = torch.randn(n_samples, 3)
    gathered = []
    with torch.no_grad():
        for start in range(0, n_samples, BATCH):
            preds = model(data[start:start + BATCH]).squeeze(1)
            out = [torch.empty_like(preds) for _ in range(world)]
            dist.all_gather(out, preds)  # collcheck: culprit
            gathered.extend(out)
    print(f"rank {rank}: gathered {sum(t.numel() for t in gathered)} predictions", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
