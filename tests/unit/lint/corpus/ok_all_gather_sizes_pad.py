"""Variable-length predictions (3 + rank values per rank) gathered the usual way: all_gather the
sizes, pad to the largest, all_gather the padded tensors, then loop over the largest size to
build a per-position statistic with one all_reduce per position.

shape: b (made uniform by a collective) — `sizes` from all_gather, `max(sizes)` drives a loop of
all_reduces; the local size differs per rank but what the loop reads does not.
truth: correct — every rank pads to the same size and loops the same number of times. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank, world = dist.get_rank(), dist.get_world_size()
    preds = torch.arange(3 + rank, dtype=torch.float32)
    size = torch.tensor([preds.numel()])
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = int(max(s.item() for s in sizes))
    padded = torch.cat([preds, torch.zeros(longest - preds.numel())])
    gathered = [torch.empty(longest) for _ in range(world)]
    dist.all_gather(gathered, padded)
    everything = torch.cat([g[: int(s)] for g, s in zip(gathered, sizes)])
    per_position = []
    for i in range(longest):
        present = torch.tensor([1.0 if i < preds.numel() else 0.0])
        dist.all_reduce(present)
        per_position.append(int(present.item()))
    assert everything.numel() == sum(3 + r for r in range(world)), everything
    print(f"rank {rank}: {everything.numel()} predictions, ranks per position {per_position}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
