"""A 2-D DeviceMesh (dp=1, tp=2) on 2 gloo ranks: only the first data-parallel replica (dp
coordinate 0) reassembles the tensor-parallel shards of a weight before exporting it.

shape: a (group members, DeviceMesh) — `if mesh.get_local_rank("dp") == 0:
dist.all_gather(..., group=mesh.get_group("tp"))`: the ranks whose dp coordinate is 0 are
exactly one tp group, so the condition lets through every member of the group the gather runs on.
truth: correct — the whole tp group gathers. Exits 0.
"""
import datetime
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

TIMEOUT = datetime.timedelta(seconds=float(os.environ.get("CORPUS_TIMEOUT_S", "5")))


def main() -> None:
    dist.init_process_group("gloo", timeout=TIMEOUT)
    mesh = init_device_mesh("cpu", (1, dist.get_world_size()), mesh_dim_names=("dp", "tp"))
    tp_rank, tp_size = mesh.get_local_rank("tp"), mesh.size(1)
    shard = torch.arange(4.0) + 4 * tp_rank  # this rank's rows of the weight
    full = None
    if mesh.get_local_rank("dp") == 0:
        pieces = [torch.empty_like(shard) for _ in range(tp_size)]
        dist.all_gather(pieces, shard, group=mesh.get_group("tp"))
        full = torch.cat(pieces)
        assert full.tolist() == list(range(4 * tp_size)), full
    dist.barrier()
    print(f"rank {dist.get_rank()}: exported {None if full is None else full.numel()} values")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
