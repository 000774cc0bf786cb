"""Completion seen by polling (2 ranks). Rank 1 comes 1 s late to two all-reduces: rank 0's async
one and its blocking one. On the simulated NCCL backend (futures complete at enqueue, a blocking
call returns at once) both return at once on rank 0 and complete only when rank 1 arrives; on gloo
with COLLCHECK_COMPLETION=poll the async one does. The log must say they completed about 1 s
after rank 0 issued them, not when they returned."""
import datetime
import time

import torch
import torch.distributed as dist

LATE_S = 1.0

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
x, y = torch.ones(4), torch.ones(4)
dist.barrier()  # the ranks leave together: rank 1's lateness is its own, not the start's skew
if rank == 1:
    time.sleep(LATE_S)
work = dist.all_reduce(x, async_op=True)  # @async
dist.all_reduce(y)  # @blocking
if rank == 0:
    time.sleep(LATE_S + 0.5)  # no sync point: only the poller can see them complete
work.wait()
print(f"rank {rank} sums {x.sum().item()} {y.sum().item()}", flush=True)
dist.destroy_process_group()
