"""Threads recording at once (2 ranks): THREADS Python threads, each on a gloo group of its own
(made in the same order on every rank), each issuing CALLS all-reduces, blocking and async in
turn, while live mode's publisher reads the recorder's tables every 50 ms
(COLLCHECK_LIVE_INTERVAL) and the log rolls to a new segment now and then (COLLCHECK_MAX_MB,
where the test sets it). The compiled path writes these records without taking the GIL back,
from a memo of each thread's last stack: each must be in the log once, with an event id and the
call site of its own."""
import datetime
import threading

import torch
import torch.distributed as dist

THREADS, CALLS = 4, 300

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
groups = [dist.new_group([0, 1]) for _ in range(THREADS)]
start = threading.Barrier(THREADS)


def step(t, group) -> None:
    dist.all_reduce(t, group=group)  # @helper


def issue(i: int) -> None:
    """Each call site twice in a row, in turn: async, blocking, blocking one frame further down."""
    group, t = groups[i], torch.ones(8)
    start.wait()
    for n in range(CALLS):
        kind = n // 2 % 3
        if kind == 0:
            dist.all_reduce(t, group=group, async_op=True).wait()  # @async
        elif kind == 1:
            dist.all_reduce(t, group=group)  # @blocking
        else:
            step(t, group)


threads = [threading.Thread(target=issue, args=(i,), name=f"issuer-{i}") for i in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
dist.barrier()
from collcheck.capture.native import fastpath  # noqa: E402 - (the test asks how the records were written)

print(f"rank {dist.get_rank()} done, {fastpath.load().stats()[3]} records without the GIL", flush=True)
dist.destroy_process_group()
