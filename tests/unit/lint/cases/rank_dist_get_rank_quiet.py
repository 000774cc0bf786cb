"""The twin of rank_dist_get_rank: rank 0 saves alone, but the barrier is outside the branch."""
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    model = torch.nn.Linear(16, 16).cuda()
    if rank == 0:
        torch.save(model.state_dict(), "init.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
