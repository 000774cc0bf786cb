"""`from torch.distributed import get_rank, all_reduce`: bare imported names still give the rank and the collective."""
import torch
from torch.distributed import all_reduce, get_rank, init_process_group


def report(metric: torch.Tensor) -> None:
    if get_rank() == 0:  # expect: branch a
        all_reduce(metric)  # expect: call a
        print(f"loss {metric.item():.4f}")


def main():
    init_process_group("nccl")
    report(torch.tensor([0.5], device="cuda"))


if __name__ == "__main__":
    main()
