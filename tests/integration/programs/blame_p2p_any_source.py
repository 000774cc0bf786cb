"""Point-to-point on 3 gloo ranks: a collector (rank 0) and 2 workers. Each worker has its own
number of tasks (rank r: r + 1); an all_reduce of the counts (world group slot 0) tells the
collector how many results come, and it receives them from any source, in whatever order the
workers finish (`dist.recv(result)` without src: it returns the sender). That receive is
correct: the ok case must be clean.

bug: a worker drops the result of a task that failed (`if not torch.isfinite(result).all():
continue`) although its count was announced. Rank 2's task 1 fails: rank 2 sends 2 of its 3
results, and the collector's last receive (its 5th; rank 2's message 2 on channel 2->0) is never
sent: rank 2 should have sent it. The workers then leave (destroy_process_group), and the
collector's receive fails (the peers are gone) or times out.

ok: a worker sends every result; the collector skips the non-finite ones.

The group timeout (SCENARIO_TIMEOUT_S, default 6 s) bounds the hang.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def run_task(rank: int, task: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(10 * rank + task)
    x = torch.randn(8, generator=g)
    if rank == 2 and task == 1:
        x[3] = float("nan")  # this task's input is corrupt
    return torch.stack([x.mean(), x.std(), torch.tensor(float(rank))])


def collector(expected: int) -> None:
    by_worker = {}
    for _ in range(expected):
        result = torch.empty(3)
        sender = dist.recv(result)  # @recv_any
        if torch.isfinite(result).all():
            by_worker.setdefault(sender, []).append(result)
    print(f"collector: results from {sorted(by_worker)}: {sum(map(len, by_worker.values()))} of {expected}")


def worker(rank: int, tasks: int, case: str) -> None:
    for task in range(tasks):
        result = run_task(rank, task)
        if case != "ok" and not torch.isfinite(result).all():  # @why
            continue  # a failed task: nothing to report
        dist.send(result, dst=0)  # @send


def main(case: str) -> None:
    timeout = datetime.timedelta(seconds=int(os.environ.get("SCENARIO_TIMEOUT_S", "6")))
    dist.init_process_group("gloo", timeout=timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    tasks = 0 if rank == 0 else rank + 1
    counts = torch.zeros(world, dtype=torch.int64)
    counts[rank] = tasks
    dist.all_reduce(counts)  # @counts
    if rank == 0:
        collector(int(counts.sum()))
    else:
        worker(rank, tasks, case)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "bug")
