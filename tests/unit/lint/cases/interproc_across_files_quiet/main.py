"""The twin of interproc_across_files: rank 0 alone checkpoints, and the helper with a barrier runs on every rank."""
import torch
import torch.distributed as dist

from utils import checkpoint, sync


def main():
    dist.init_process_group("nccl")
    model = torch.nn.Linear(8, 8).cuda()
    if dist.get_rank() == 0:
        checkpoint(model, "ckpt.pt")
    sync()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
