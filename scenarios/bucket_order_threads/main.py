"""Hand-written gradient sync that all-reduces parameter groups in a rank-dependent order.

The "priority" heuristic (sync the group with the largest local gradient first, so the
optimizer can start on it early) sorts by a quantity each rank computes from its own data,
so rank 0 and rank 1 issue the two all-reduces in a different order.  A background comm
thread issues them, as in the multi-threaded backward discussed in pytorch/pytorch#3435.
"""
import datetime
from concurrent.futures import ThreadPoolExecutor
import os
import torch
import torch.distributed as dist


def sync_gradients(groups):
    # order by local gradient norm: differs from rank to rank
    order = sorted(groups, key=lambda name: -sum(p.grad.norm().item() for p in groups[name]))
    flats = {name: torch.cat([p.grad.flatten() for p in groups[name]]) for name in groups}

    def comm_thread():
        works = [dist.all_reduce(flats[name], async_op=True) for name in order]  # collcheck: culprit
        for work in works:
            work.wait()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="grad-comm") as pool:
        pool.submit(comm_thread).result()  # re-raises a failed all-reduce here
    return order


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("SCENARIO_TIMEOUT_S", "6"))))
    rank = dist.get_rank()
    torch.manual_seed(0)
    encoder = torch.nn.Linear(16, 8)   # 136 parameters
    head = torch.nn.Linear(8, 2)       # 18 parameters
    groups = {"encoder": list(encoder.parameters()), "head": list(head.parameters())}

    torch.manual_seed(1 + rank)
    x = torch.randn(4, 16) * (1.0 if rank == 0 else 0.01)  # rank 1's shard has tiny inputs
    loss = head(torch.relu(encoder(x))).pow(2).sum()
    loss.backward()
    order = sync_gradients(groups)
    print(f"rank {rank}: synced {order}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
