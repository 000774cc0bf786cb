"""Point-to-point with batch_isend_irecv on 4 gloo ranks: a 1-D periodic diffusion problem split
into 4 slabs of 8 cells. Rank 0 broadcasts the initial field (world group slot 0); then 3 times
each rank exchanges its edge cells with its left and right neighbours (one batch of isend/irecv
pairs), updates its slab and all-reduces the residual.

bug: the neighbours are computed as `left = (rank - 1) % world` (periodic) but `right = rank + 1
if rank + 1 < world else None` (the wrap forgotten): every rank but the last has a right
neighbour. Rank 3 (the last) exchanges nothing with rank 0, while rank 0, whose left neighbour is
3, posts a send to 3 and a receive from 3: message 0 of channel 3->0 (rank 0's receive) is never
sent, and message 0 of channel 0->3 is never received, both by rank 3. Rank 0 waits in its
batch; ranks 1-3 complete theirs and wait in the residual's all_reduce (slot 1).

ok: `right = (rank + 1) % world`.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist

CELLS = 8


def neighbours(rank: int, world: int, case: str):
    left = (rank - 1) % world
    if case == "ok":
        return left, (rank + 1) % world
    right = rank + 1 if rank + 1 < world else None  # @why
    return left, right


def exchange(slab: torch.Tensor, left, right) -> tuple[torch.Tensor, torch.Tensor]:
    """The neighbours' edge cells (a zero where there is no neighbour)."""
    from_left, from_right = torch.zeros(1), torch.zeros(1)
    ops = []
    for peer, edge, halo in ((left, slab[:1], from_left), (right, slab[-1:], from_right)):
        if peer is not None:
            ops += [dist.P2POp(dist.isend, edge.clone(), peer), dist.P2POp(dist.irecv, halo, peer)]
    for request in dist.batch_isend_irecv(ops):  # @batch
        request.wait()
    return from_left, from_right


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    field = torch.zeros(world * CELLS)
    if rank == 0:
        field[world * CELLS // 2] = 1.0  # a hot spot
    dist.broadcast(field, src=0)
    slab = field[rank * CELLS:(rank + 1) * CELLS].clone()
    left, right = neighbours(rank, world, case)
    for step in range(3):
        from_left, from_right = exchange(slab, left, right)
        padded = torch.cat([from_left, slab, from_right])
        new = slab + 0.25 * (padded[:-2] - 2 * slab + padded[2:])
        residual = (new - slab).abs().sum()
        dist.all_reduce(residual)  # @residual
        slab = new
    print(f"rank {rank}: residual {residual.item():.6f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
