"""DTensor on a 1-D DeviceMesh of 4 gloo ranks, CPU: a weight (6x8) and a bias (6) sharded by rows
(Shard(0): the bias' 6 rows give ranks 0-2 two each and the last rank none). Three steps each
decay the local shards and log the parameters' norm (a Partial DTensor made whole: one
all_reduce); then a snapshot loop makes each parameter whole (full_tensor(): an all-gather).

bug: inside the snapshot's `for` loop, the last rank of the mesh skips the bias (`if
name.endswith("bias") and mesh.get_local_rank() == mesh.size() - 1: continue`, its shard of it
is empty), but full_tensor() is a collective. World group: the 3 norms' all_reduces (slots
0-2), the weight's all-gather (slot 3), then ranks 0-2 issue the bias' all-gather at slot 4
while rank 3, which took the `continue`, is missing it and issues the final barrier there.

ok: every rank makes every parameter whole.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("shard",))
    torch.manual_seed(0)
    params = {"layer.weight": distribute_tensor(torch.randn(6, 8), mesh, [Shard(0)], src_data_rank=None),
              "layer.bias": distribute_tensor(torch.randn(6), mesh, [Shard(0)], src_data_rank=None)}
    for step in range(3):
        for p in params.values():
            p.to_local().mul_(0.9)  # each rank updates its own rows
        squares = [p.square().sum() for p in params.values()]  # Partial: a sum over the ranks' rows
        norm = (squares[0] + squares[1]).full_tensor().sqrt()  # @norm
        print(f"rank {dist.get_rank()} step {step}: norm {norm.item():.4f}")
    snapshot = {}
    for name, p in params.items():
        if case != "ok" and name.endswith("bias") and mesh.get_local_rank() == mesh.size() - 1:  # @cond
            continue  # this rank holds no rows of the bias
        snapshot[name] = p.full_tensor()  # @full
    dist.barrier()  # @barrier
    print(f"rank {dist.get_rank()}: snapshot of {sorted(snapshot)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
