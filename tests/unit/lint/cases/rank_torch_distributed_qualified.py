"""`torch.distributed.get_rank()` written in full, with `torch.distributed.barrier()` in the branch."""
import torch
import torch.nn as nn


def save_and_sync(model: nn.Module, path: str) -> None:
    if torch.distributed.get_rank() == 0:  # expect: branch a
        torch.save(model.state_dict(), path)
        torch.distributed.barrier()  # expect: call a


def main():
    torch.distributed.init_process_group("nccl")
    save_and_sync(nn.Linear(4, 4).cuda(), "model.pt")


if __name__ == "__main__":
    main()
