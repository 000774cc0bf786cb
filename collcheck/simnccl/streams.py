"""Works, streams and sync points: when a simulated collective runs and who waits for it.

A group's collectives run on its stream (one worker thread, issue order); the CPU goes on at
once and waits only at a sync point (`sync_point`: a barrier, a value read on the CPU) or where
torch's C++ code reads a result right after `wait()`.
"""

from __future__ import annotations

import queue
import sys
import threading
import time

import torch
import torch.distributed as dist

from ..capture import session

_live: set = set()  # every issued, not yet finished Work of this process
_joined: set = set()  # of those, the ones wait() was called on: the compute stream waits for them
using: dict = {}  # storage address -> the unfinished Works that read or write it (order.py)
_live_lock = threading.Lock()


def storages(tensors) -> set[int]:
    """The storage addresses of the tensors in `tensors` (nested lists of tensors too)."""
    out, stack = set(), [tensors]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            if x.numel():
                out.add(x.untyped_storage().data_ptr())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return out


def settle(seconds: float) -> None:
    """Give the streams up to `seconds` to run what they can (peers that arrived)."""
    end = time.monotonic() + seconds
    while _live and time.monotonic() < end:
        time.sleep(0.01)


def works_using(addresses: set[int]) -> list:
    """The unfinished Works that read or write any of these storages."""
    found: set = set()
    with _live_lock:
        for a in addresses & using.keys():
            found |= using[a]
    return list(found)


class SimWork(dist._Work):
    """A collective on a simulated stream. `wait()` returns at once (NCCL: it orders streams, the
    CPU does not wait); the future is complete at once too (NCCL's is a CUDA future, marked
    complete at enqueue); `is_completed()` says whether the stream has run it."""

    def __init__(self, outputs: list, op: str, seq: int, eid: int | None, tensors=()):
        super().__init__()
        self.op, self.seq, self.eid = op, seq, eid
        self.outputs = outputs
        self.storages = storages([outputs, tensors])
        self.t_issue = time.monotonic()
        self.t_returned = None
        self.error: BaseException | None = None
        self._done = threading.Event()
        self._future = torch.futures.Future()
        self._future.set_result(outputs)
        with _live_lock:
            # NCCL's stream waits for the compute stream before it runs an op, and the compute
            # stream for every op waited on before: this op runs after those
            self.after = list(_joined)
            _live.add(self)
            for address in self.storages:
                using.setdefault(address, set()).add(self)

    def wait(self, timeout=None) -> bool:
        """Python callers (the dist.* API, the user) go on at once, as under NCCL. A wait reached
        from torch's C++ code (DDP's parameter check and broadcasts, which read the result on the
        CPU next, where NCCL's device-to-host copy waits) blocks: the caller's Python frame is
        then the one that entered C++, which never names `wait` itself."""
        caller = sys._getframe(1)
        if "wait" not in caller.f_code.co_names:
            sync_point("wait() in torch's C++ code", caller, [self])
        else:
            self.join_compute_stream()
        return True

    def join_compute_stream(self) -> None:
        with _live_lock:
            if not self._done.is_set():
                _joined.add(self)

    def is_completed(self) -> bool:
        return self._done.is_set()

    def is_success(self) -> bool:
        return self._done.is_set() and self.error is None

    def exception(self):
        return self.error

    def get_future(self):
        return self._future

    def result(self):
        return self.outputs

    def finish(self, error: BaseException | None) -> None:
        """The kernel ended: is_completed() says so from now on (the recorder's poller sees it, as it
        sees an NCCL kernel's end event), and the CPU waiting in it (if any) is released."""
        self.error = error
        self._done.set()
        with _live_lock:
            _live.discard(self)
            _joined.discard(self)
            for address in self.storages:
                works = using.get(address)
                if works is not None:
                    works.discard(self)
                    if not works:
                        del using[address]

    def block(self, deadline: float | None) -> bool:
        """The CPU waits for this collective (a sync point); False: the deadline passed."""
        return self._done.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))


def sync_point(what: str, frame=None, works=None) -> None:
    """What a device synchronization does under NCCL: the CPU waits until every collective this
    process issued so far (or `works`) has run; the watchdog aborts the process if one never
    does. The recorder is told where, and for which collective, before the CPU waits."""
    if isinstance(threading.current_thread(), Stream):
        return  # a stream reading its own buffers is not a CPU sync
    if works is None:
        if not _live:
            return
        with _live_lock:
            works = list(_live)
    waiting = [w for w in works if not w.is_completed()]
    if not waiting:
        return
    rec = session.recorder()
    if rec is not None and rec.active:
        first = min(waiting, key=lambda w: w.t_issue)
        try:
            rec.on_sync(frame or sys._getframe(1), first.eid, what)
        except Exception as exc:  # noqa: BLE001 - never break the job for a record
            rec.fail(exc)
    for work in waiting:
        work.block(None)


class Stream(threading.Thread):
    """One CUDA stream: runs its jobs one after the other, in issue order."""

    def __init__(self, name: str, group):
        super().__init__(name=name, daemon=True)
        self.group = group
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.start()

    def run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            work, run = job
            try:
                for earlier in work.after:
                    earlier.block(None)
                work.after = ()
                run(work)
                work.finish(None)
            except Aborted as exc:
                work.finish(exc)
            except Timeout as exc:
                self.group.watchdog_abort(work, exc)
            except Exception:  # noqa: BLE001 - the store went away: under NCCL the kernel just waits
                try:
                    self.group._wait_keys(["never"], work)
                except Aborted as exc:
                    work.finish(exc)
                except Timeout as exc:
                    self.group.watchdog_abort(work, exc)


class Timeout(dist.DistBackendError):
    pass


class Aborted(dist.DistBackendError):
    pass


class Batch(dist._Work):
    """The Work of a coalesced batch: complete when all of its ops are."""

    def __init__(self, works: list):
        super().__init__()
        self.works = works
        self._future = torch.futures.Future()
        self._future.set_result([])

    def wait(self, timeout=None) -> bool:
        for work in self.works:
            work.join_compute_stream()
        return True

    def is_completed(self) -> bool:
        return all(w.is_completed() for w in self.works)

    def get_future(self):
        return self._future
