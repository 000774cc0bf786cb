"""The collective two files away: main.py calls utils.checkpoint on rank 0 alone; utils.py holds the barrier."""
import torch
import torch.distributed as dist

from utils import checkpoint


def main():
    dist.init_process_group("nccl")
    model = torch.nn.Linear(8, 8).cuda()
    if dist.get_rank() == 0:  # expect: branch a
        checkpoint(model, "ckpt.pt")  # expect: call a
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
