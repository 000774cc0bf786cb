"""A gloo job that writes PyTorch's own Flight Recorder dump per rank, as a user's job would
(gloo writes none by itself: this calls torch's `_dump_fr_trace()` on the way out, also after
the timeout). No collcheck in the job.

argv: out directory (dumps go to <out>/rank_<rank>), scenario, format ("pickle" or "json").
Scenarios:
  skip      rank 1 skips the second all_reduce, then both broadcast (both time out)
  clean     a correct program, rank 0 also using a private one-rank group: with a small
            TORCH_FR_BUFFER_SIZE the ranks' buffers wrap at different points
  shape     all_reduce of 4 floats on rank 0, 6 on rank 1, in a sub-group of both ranks (gloo
            completes it or fails it; the dumps must show the sizes)
"""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

out, scenario, fmt = sys.argv[1], sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=3))
rank = dist.get_rank()


def helper_all_reduce(t):
    dist.all_reduce(t)  # @helper


def body():
    t = torch.ones(8)
    if scenario == "skip":
        dist.all_reduce(t)  # @first
        if rank != 1:
            helper_all_reduce(t)
        dist.broadcast(t, src=0)  # @broadcast
    elif scenario == "clean":
        mine = dist.new_group([0])  # every rank creates it; only rank 0 uses it
        both = dist.new_group([0, 1])
        for i in range(20):
            dist.all_reduce(t)  # @loop_all_reduce
            if rank == 0:
                for _ in range(i % 3):
                    dist.all_reduce(t, group=mine)  # @private
            if i % 4 == 0:
                dist.all_gather_into_tensor(torch.zeros(16), torch.ones(8), group=both)  # @gather
        dist.barrier()  # @barrier
    elif scenario == "shape":
        both = dist.new_group([0, 1])
        dist.all_reduce(torch.ones(4 if rank == 0 else 6), group=both)  # @shape


try:
    body()
except Exception as exc:  # noqa: BLE001 - the timeout of a hung collective
    print(f"rank {rank} raised {type(exc).__name__}", flush=True)
dump = (torch._C._distributed_c10d._dump_fr_trace_json() if fmt == "json"
        else torch._C._distributed_c10d._dump_fr_trace())
path = os.path.join(out, f"rank_{rank}")
with open(path + ".tmp", "wb") as f:
    f.write(dump.encode() if isinstance(dump, str) else dump)
os.rename(path + ".tmp", path)
deadline = time.monotonic() + 10  # torchrun kills the others when one rank exits first
while time.monotonic() < deadline and len([n for n in os.listdir(out) if not n.endswith(".tmp")]) < 2:
    time.sleep(0.1)
os._exit(0)
