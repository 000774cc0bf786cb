"""World size 1 on gloo, its store a TCPStore served by another process (the test's).
`fail`: all-reduces for 4 s while the test kills the store's server: live mode turns off with one
warning, the job goes on. `pause`: after collcheck.disable(), nothing more is published."""
import datetime
import sys
import time

import msgpack
import torch
import torch.distributed as dist

mode, port = sys.argv[1], int(sys.argv[2])
store = dist.TCPStore("127.0.0.1", port, 1, False, timeout=datetime.timedelta(seconds=5))
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
t = torch.ones(4)
if mode == "fail":
    print("running", flush=True)
    end = time.time() + 4
    while time.time() < end:
        dist.all_reduce(t)
        time.sleep(0.01)
    print("done", flush=True)
else:
    import collcheck

    key, default = "collcheck/live/0", dist.distributed_c10d._get_default_store()
    for _ in range(50):
        dist.all_reduce(t)
    time.sleep(1.0)
    collcheck.disable()
    before = msgpack.unpackb(default.get(key))
    time.sleep(1.5)
    after = msgpack.unpackb(default.get(key))
    print("published", before["q"], after["q"], before.get("s"), flush=True)
dist.destroy_process_group()
