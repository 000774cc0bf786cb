"""`dist.get_rank()` through `import torch.distributed as dist`: rank 0 alone waits in a barrier."""
import torch
import torch.distributed as dist


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    model = torch.nn.Linear(16, 16).cuda()
    if rank == 0:  # expect: branch a
        torch.save(model.state_dict(), "init.pt")
        dist.barrier()  # expect: call a
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
