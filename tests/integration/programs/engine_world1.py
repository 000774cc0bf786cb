"""Which engine the recorder records through, chosen once when its log opens (a world-size-1 gloo job).

argv: log directory, master port."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import collcheck
from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log

directory, port = sys.argv[1], sys.argv[2]
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)

rec = collcheck.enable(directory, run_id="engine")
print("before the log", type(rec.engine).__name__, flush=True)
dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
engine = rec.engine
for _ in range(20):
    dist.all_reduce(torch.ones(2))
dist.all_reduce(torch.ones(2), async_op=True).wait()
same = rec.engine is engine and rec.completions._engine is engine and rec.live._engine is engine
print("engine", type(engine).__name__, "compiled", rec.compiled, "same", same, flush=True)
path = collcheck.disable()
colls = [r for r in read_log(path).records if r["k"] == lf.COLL]
print("records", len(colls), "numbered", [r.get("j") for r in colls] == list(range(21)), flush=True)
dist.destroy_process_group()
