"""A 2-D DeviceMesh (dp=2, tp=1) on 2 gloo ranks: the tensor-parallel leaders (tp coordinate 0)
average a replicated statistic over the data-parallel dimension, then share it inside their
tensor-parallel group (of one rank here).

shape: a (group members, DeviceMesh slicing) — `if mesh["tp"].get_local_rank() == 0:
dist.all_reduce(stat, group=mesh["dp"].get_group())`: the ranks with tp coordinate 0 are exactly
one dp group.
truth: correct — every member of the dp group issues the all_reduce. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    mesh = init_device_mesh("cpu", (dist.get_world_size(), 1), mesh_dim_names=("dp", "tp"))
    dp_mesh, tp_mesh = mesh["dp"], mesh["tp"]
    stat = torch.tensor([float(dist.get_rank() + 1)])
    if tp_mesh.get_local_rank() == 0:
        dist.all_reduce(stat, group=dp_mesh.get_group())
        stat /= dp_mesh.size()
    dist.broadcast(stat, src=dist.get_global_rank(tp_mesh.get_group(), 0), group=tp_mesh.get_group())
    assert stat.item() == (dist.get_world_size() + 1) / 2, stat
    print(f"rank {dist.get_rank()}: mean {stat.item()}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
