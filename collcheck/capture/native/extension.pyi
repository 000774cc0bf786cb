"""The compiled recording path (fastpath.cpp), as Python sees the module fastpath.load() returns.

Built under a name that hashes its sources and torch's version (fastpath.module_name), so there is
no importable module of this name: this stub types what fastpath.py, hooks.py and the recorder call.
Keep it in step with the m.def / py::class_ definitions of fastpath.cpp (tests/unit/capture checks)."""

from collections.abc import Callable
from typing import Any

# -- registration and the recorder it reports to ---------------------------------------
def install(classify: Callable[[Any], tuple],
            specs: list[tuple[str, int, int, int, int, int, int, bool]]) -> None:
    """Register the kernels once per process: callsite._classify, and per wire op (name, group,
    tensors, reduce op, root/peer, tag, async_op positions (-1: none), cache its records)."""

def attach(issue: Callable[[int, tuple, Any, list | None, Any], int | None],
           returned: Callable[[int, int, BaseException | None], None],
           label_sid: Callable[[str, int], int],
           fail: Callable[[BaseException], None],
           t0: int,
           writer: Any) -> None:
    """Report to a new recorder (its NativeHooks callbacks, Recorder.fail, its origin in
    monotonic ns and its LogWriter): new templates, event ids from 0."""

def set_enabled(on: bool) -> None: ...
def registered() -> bool: ...
def after_fork_in_child() -> None: ...
def stage_clock() -> tuple[list[int], int, int, int, int, float, list[int], list[int]] | None:
    """Built with -DCOLLCHECK_STAGE_CLOCK (benchmarks/bench_stages.py): the clock's ticks summed
    per stage of the recorded calls that took the path without the GIL, their number, the ticks
    the completion callbacks took in the backend's threads, their number, the clock now, the
    ticks one read of the clock takes, and per call so far the ticks of collcheck's stages and of
    torch's redispatch; else None."""

def stage_part(part: int) -> bool:
    """Built with -DCOLLCHECK_STAGE_CLOCK: how far the kernel goes from now on (0: all of it;
    1: the dispatcher's hop alone; 2: the record, its completion not watched), True; else False
    and nothing changes."""

def stats() -> tuple[int, int, int, int]:
    """(templates, classified code objects, Work types without a future, records written
    without taking the GIL back)."""

# -- state shared with the recorder (writer lock held) ----------------------------------
def cache(tid: int, head: bytes, mid: bytes, pairs: int, gid: int, opname: str, labels: bytes,
          bucket: str | None, backward: bool, seq: int, sig: int | None) -> None:
    """A template packed by NativeHooks._hand_over: the kernel writes its next records itself."""

def next_eid() -> int: ...
def peek_eid() -> int: ...
def next_seq(key: int) -> int: ...
def seqs() -> list[tuple[int, int]]: ...
def label_state(gid: int, eid: int, bucket: bool, epoch: int) -> int: ...
def crc32(data: bytes) -> int:
    """The CRC-32 the compiled path puts in its frames (zlib.crc32's)."""
def mix(key: int, j: int, sig: int) -> None: ...
def live() -> list[tuple[int, int, list[int]]]: ...
def set_api(on: bool) -> None: ...
def set_epoch(epoch: int) -> None: ...
def track(eid: int, t_ns: int, ident: int, opname: str) -> None: ...
def forget(eid: int) -> None: ...
def inflight() -> list[tuple[int, tuple[int, int, str]]]: ...
def take_done() -> list[tuple[int, int, int | None, BaseException | None]] | None: ...
def has_done() -> bool: ...
def set_polling(mode: int) -> None:
    """Which Works are kept for polling: 0 NCCL/XCCL works, 1 every Work, -1 none."""
def poll(batch: int) -> int:
    """Ask up to `batch` kept Works whether they completed (GIL released); returns how many are kept."""

# -- the log file -----------------------------------------------------------------------
class WriterLock:
    """LogWriter.lock and LogWriter.counters on the compiled path (fastpath.cpp)."""

    closed: bool
    fd: int
    written: int
    segment_bytes: int
    @property
    def mappable(self) -> bool: ...
    @property
    def error(self) -> int:
        """errno of the write that failed (its room could not be allocated): nothing written since."""
    @property
    def allocated(self) -> int: ...
    def __init__(self) -> None: ...
    def acquire(self, blocking: bool = True, timeout: float = -1.0) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> None: ...
    def __exit__(self, *args: object) -> None: ...
    def append(self, data: bytes) -> None: ...
    def append_reserved(self, data: bytes) -> None:
        """The stop record, into the room kept past the last frame."""
    def trim(self) -> None: ...
