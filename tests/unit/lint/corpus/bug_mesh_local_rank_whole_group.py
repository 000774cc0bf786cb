"""A 1-D DeviceMesh ("dp", 2 gloo ranks, CPU): the first rank of the data-parallel dimension
averages a statistic over the dimension's group, but the group holds every rank of the dimension.

shape: a condition that lets through fewer ranks than the group holds — `if
mesh.get_local_rank("dp") == 0: dist.all_reduce(stat, group=mesh.get_group("dp"))`.
truth: buggy — rank 0 all_reduces on a group of 2 whose other member is at the final barrier.
expected lint target: bug_mesh_local_rank_whole_group.py:25 (the call, marker @bug) under the
condition at line 24 (marker @cond).
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("dp",))
    stat = torch.tensor([float(dist.get_rank() + 1)])
    if mesh.get_local_rank("dp") == 0:  # @cond
        dist.all_reduce(stat, group=mesh.get_group("dp"))  # @bug
        print(f"rank {dist.get_rank()}: total {stat.item()}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
