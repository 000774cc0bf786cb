"""Valid: rooted collectives whose outputs exist only on the root.

gather (gather_list only on dst), scatter (scatter_list only on src), gather_object
(object_gather_list only on dst) and reduce to a root: the arguments are legitimately
rank-dependent, the collectives still match.
"""
import datetime
import os
import torch
import torch.distributed as dist

ROOT = 0


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    # scatter work items from the root
    chunk = torch.empty(4)
    chunks = [torch.full((4,), float(i)) for i in range(world)] if rank == ROOT else None
    dist.scatter(chunk, scatter_list=chunks, src=ROOT)
    result = chunk * 2 + rank
    # gather the results on the root only
    gathered = [torch.empty(4) for _ in range(world)] if rank == ROOT else None
    dist.gather(result, gather_list=gathered, dst=ROOT)
    # gather per-rank metadata as Python objects
    objs = [None] * world if rank == ROOT else None
    dist.gather_object({"rank": rank, "n": int(result.numel())}, objs, dst=ROOT)
    # reduce the loss to the root
    loss = torch.rand(1)
    dist.reduce(loss, dst=ROOT, op=dist.ReduceOp.SUM)
    if rank == ROOT:
        print(f"root: gathered {[g[0].item() for g in gathered]}, objs {objs}, loss sum {loss.item():.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
