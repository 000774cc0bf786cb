"""collcheck.enable()/disable() and collcheck.recording() in a world-size-1 gloo job (no torchrun).

argv: log directory, master port."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import collcheck

directory, port = sys.argv[1], sys.argv[2]


def kernels_registered() -> bool:
    """Whether collcheck's dispatcher kernels are registered (the compiled or the Python ones)."""
    from collcheck.capture.native import fastpath
    from collcheck.capture import dispatcher as kernels

    return fastpath._loaded.registered() if kernels._compiled else isinstance(kernels._library, torch.library.Library)


os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)

collcheck.enable(os.path.join(directory, "enabled"), run_id="enabled")  # before init: opens at init
dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=10))
t = torch.ones(3)
dist.all_reduce(t)  # @enabled_all_reduce
path = collcheck.disable()
print("disabled", path, flush=True)
print("registered after disable", kernels_registered(), flush=True)
dist.all_reduce(t)  # not recorded
with collcheck.recording(os.path.join(directory, "ctx"), run_id="ctx"):
    dist.broadcast(torch.zeros(2, dtype=torch.int64), src=0)  # @ctx_broadcast
    dist.barrier()  # @ctx_barrier
    from collcheck.capture import session

    counters = session.recorder().writer.counters
    print("registered while recording", kernels_registered(), flush=True)
    print("mapped", getattr(counters, "mappable", None), flush=True)  # compiled path: a mapping of the file
    rec = session.recorder()
    rec.active = False  # paused: no kernel of collcheck in the call path
    print("registered while paused", kernels_registered(), flush=True)
    dist.all_reduce(t)  # paused: not recorded
    rec.active = True
    print("registered after resuming", kernels_registered(), flush=True)
    dist.all_reduce(t)  # @ctx_resumed
dist.all_reduce(t)  # not recorded either
print("value", t.tolist(), flush=True)
print("patched", hasattr(dist.all_reduce, "__collcheck_original__"), flush=True)
dist.destroy_process_group()
