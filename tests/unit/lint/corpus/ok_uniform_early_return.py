"""A fine-tuning step that returns early when no rank has any labelled example: the local count
is all_reduced, and every rank returns (or goes on) on the reduced total (rank 0 has none).

shape: d (early return on all ranks from a uniform value) — `total = torch.tensor(local);
dist.all_reduce(total); if total.item() == 0: return` before the gradient all_reduce.
truth: correct — every rank returns or none does. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def labelled_step(model: torch.nn.Module, x: torch.Tensor, labelled: torch.Tensor) -> bool:
    total = torch.tensor([float(labelled.sum())])
    dist.all_reduce(total)
    if total.item() == 0:
        return False
    loss = (model(x).squeeze(1) * labelled).sum() / total
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)
    return True


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    none = torch.zeros(8)
    some = torch.zeros(8) if rank == 0 else torch.ones(8)
    results = [labelled_step(model, torch.randn(8, 4), none), labelled_step(model, torch.randn(8, 4), some)]
    assert results == [False, True], results
    print(f"rank {rank}: steps taken {results}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
