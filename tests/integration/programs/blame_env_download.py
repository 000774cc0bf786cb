"""Plain torch.distributed on 4 gloo ranks (one node): the node's local rank 0 writes the
dataset file while the other local ranks wait in a barrier, then rank 0 broadcasts the initial
weights and every rank trains 2 steps (argv[1] picks the case, argv[2] is the data folder).

bug: the wait is written as `if int(os.environ["LOCAL_RANK"]) != 0: dist.barrier() else:
write the file` and the else-branch never reaches the barrier that releases the others. Ranks
1-3 (LOCAL_RANK 1-3) issue the barrier as world group slot 1 (slot 0: the seed's broadcast);
rank 0, in the else-branch, skips it and issues the weight's broadcast at slot 1 instead: rank
0 is missing the barrier, the other three wait in it (gloo: a mismatch or the group timeout).

ok: the else-branch writes the file, then joins the barrier.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def write_dataset(path: str, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    torch.save({"x": torch.randn(64, 8, generator=g), "y": torch.randn(64, 1, generator=g)}, path)


def load_dataset(folder: str, seed: int, case: str) -> dict:
    """The node's local rank 0 writes the file once; the others wait for it, then read it."""
    path = os.path.join(folder, f"data-{seed}.pt")
    if int(os.environ["LOCAL_RANK"]) != 0:  # @cond
        dist.barrier()  # @wait
    else:
        write_dataset(path, seed)
        if case == "ok":
            dist.barrier()  # release the other local ranks
    return torch.load(path)


def main(case: str, folder: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    seed = torch.tensor([1234 if rank == 0 else 0])
    dist.broadcast(seed, src=0)  # every rank uses rank 0's seed
    data = load_dataset(folder, int(seed), case)
    model = torch.nn.Linear(8, 1)
    for p in model.parameters():
        dist.broadcast(p.data, src=0)  # @bcast
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = data["x"][rank::world], data["y"][rank::world]
    for _ in range(2):
        torch.nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
