"""Run a program as one rank of a torchrun job (no collcheck) and write torch's own Flight
Recorder dump (`_dump_fr_trace()`) to <out>/rank_<rank> on the way out: normal exit, an
exception (gloo's timeout), SIGTERM (torchrun stopping the survivors) or a deadline. gloo writes
no dump by itself; this is what a user of gloo would do to get one.

argv: out directory, script, deadline in seconds.
"""
import os
import runpy
import signal
import sys
import threading
import time

import torch

out, script, deadline = sys.argv[1], sys.argv[2], float(sys.argv[3])
rank = int(os.environ.get("RANK", "0"))
world = int(os.environ.get("WORLD_SIZE", "1"))
_once = threading.Lock()
_dumped = False


def dump() -> None:
    """Once; a second caller (SIGTERM's thread and the main thread's handler) waits for the first."""
    global _dumped
    with _once:
        if _dumped:
            return
        _dumped = True
        try:
            data = torch._C._distributed_c10d._dump_fr_trace()
        except Exception as exc:  # noqa: BLE001 - no process group yet: nothing to dump
            print(f"fr_wrap: rank {rank}: no dump ({exc!r})", file=sys.stderr, flush=True)
            return
        _write(data)


def _write(data: bytes) -> None:
    path = os.path.join(out, f"rank_{rank}")
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.rename(path + ".tmp", path)


def wait_for_the_others(seconds: float = 8) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and len([n for n in os.listdir(out) if n.startswith("rank_")
                                          and not n.endswith(".tmp")]) < world:
        time.sleep(0.1)


def on_term(signum, frame):
    dump()
    os._exit(143)


def watch_signals(fd: int) -> None:
    """SIGTERM while the main thread is blocked inside a gloo collective: Python runs its handler
    only when that call returns, which it never does; the C handler still writes the signal's
    number to the wakeup fd, so this thread dumps (as NCCL's monitor thread would) and exits."""
    while True:
        data = os.read(fd, 16)
        if signal.SIGTERM in data:
            on_term(signal.SIGTERM, None)


def on_deadline():
    dump()
    wait_for_the_others(3)
    os._exit(124)


def dump_before(destroy):
    """destroy_process_group empties the recorder: dump first, as a user's exit hook would."""

    def wrapper(*args, **kwargs):
        if not args and not kwargs.get("group"):
            dump()
        return destroy(*args, **kwargs)

    return wrapper


import torch.distributed as dist
from torch.distributed import distributed_c10d

dist.destroy_process_group = distributed_c10d.destroy_process_group = dump_before(dist.destroy_process_group)
# the work is done by watch_signals' thread (the main thread may be blocked, or inside dump());
# this handler only keeps SIGTERM from killing the process first
signal.signal(signal.SIGTERM, lambda signum, frame: None)
_r, _w = os.pipe()
os.set_blocking(_w, False)
signal.set_wakeup_fd(_w)
threading.Thread(target=watch_signals, args=(_r,), daemon=True).start()
timer = threading.Timer(deadline, on_deadline)
timer.daemon = True
timer.start()
sys.argv = [script]
code = 0
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
except BaseException as exc:  # noqa: BLE001 - the program's own failure: dump, then exit as it would
    print(f"fr_wrap: rank {rank} raised {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    code = 1
dump()
wait_for_the_others()
os._exit(code)
