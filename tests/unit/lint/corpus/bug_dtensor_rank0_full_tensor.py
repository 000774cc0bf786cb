"""DTensor on a 1-D DeviceMesh of 2 gloo ranks, CPU: a weight sharded by rows, updated locally;
rank 0 alone prints the whole weight with .full_tensor() (an all-gather).

shape: rank-dependent branch around a DTensor method that issues a collective — `if rank == 0:
print(w.full_tensor())`.
truth: buggy — rank 0's all-gather meets rank 1's final barrier.
expected lint target: bug_dtensor_rank0_full_tensor.py:30 (the call, marker @bug) under the
condition at line 29 (marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    rank = dist.get_rank()
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)
    w = distribute_tensor(torch.randn(8, 4), mesh, [Shard(0)])
    for step in range(3):
        w.to_local().mul_(0.9)
    if rank == 0:  # @cond
        print(f"rank 0: weight norm {w.full_tensor().norm():.4f}")  # @bug
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
