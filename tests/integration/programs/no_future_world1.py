"""Async reduce-scatters on gloo, whose Work has no future, in a world-size-1 job (no torchrun).

argv: log directory, master port, calls. Prints how many Work types (compiled path) or (op, group)
pairs (Python path) were found without a future: each is asked once, a c10::Error per call would
cost ~100 us of CPU."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import collcheck
from collcheck.capture.native import fastpath

directory, port, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
rec = collcheck.enable(directory, run_id="nofuture")
dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=10))
out, inp = torch.zeros(4), torch.ones(4)
for _ in range(calls):
    dist.reduce_scatter_tensor(out, inp, async_op=True).wait()  # @reduce_scatter
print("without a future", fastpath.load().stats()[2] if rec.compiled else len(rec.completions.no_future), flush=True)
collcheck.disable()
dist.destroy_process_group()
