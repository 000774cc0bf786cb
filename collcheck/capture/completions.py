"""When each recorded collective returned and completed: D records and the in-flight table.

Completions without an error ride inside the next C record (`d`, times relative to it: a few
bytes instead of a 24-byte D record; LogWriter.done), or become D records when no C record
comes (the watchdog's flush).

A blocking API call completes when its wrapper returns (the recorder's ApiCall keeps its return
time); anything else (async_op=True, C++ callers such as DDP's reducer) when its Work's future
completes, which happens in a gloo thread: the Python kernels' callback only appends to the
queue here, the compiled path's callback pushes onto a C++ queue (no GIL); both are drained into
D records by the next record or by the watchdog within 0.2 s.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import torch

from ..logfile import format as lf
from ..logfile.checkpoint import MAX_LISTED
from ..logfile.writer import LogWriter

_unbox_work = torch._C._distributed_c10d.Work.unbox


class Completions:
    """One recorder's completions not written yet and its in-flight table (the watchdog's); on the
    compiled path the kernels keep both in C++ (use_native) and this reads them from there."""

    def __init__(self, clock: Callable[[], int]):
        self._clock = clock  # µs since the recorder's origin (Recorder.now_us)
        self._native = None  # the compiled kernels' module while they report to this recorder
        self._inflight: dict[int, tuple[int, int, str]] = {}  # eid -> (t_ns, thread ident, op)
        # (eid, returned, completed or None, Future | exception | None), not written yet
        self._queue: deque = deque()
        self.no_future: set[tuple] = set()  # (op, group name) whose Work has no future
        self.failed: list[int] = []  # collectives that raised (their first MAX_LISTED): checkpoints

    def use_native(self, module) -> None:
        """Keep the in-flight table and the completions queue in the compiled kernels' module (None:
        in Python again)."""
        self._native = module

    def after_fork_in_child(self) -> None:
        """A forked child: the parent's collectives are not in flight in it."""
        self._inflight = {}
        self.failed = []

    # -- in-flight table ------------------------------------------------------------------
    def track(self, eid: int, op: str) -> None:
        if self._native is not None:
            self._native.track(eid, time.monotonic_ns(), threading.get_ident(), op)
        else:
            self._inflight[eid] = (time.monotonic_ns(), threading.get_ident(), op)

    def forget(self, eid: int) -> None:
        self._inflight.pop(eid, None)
        if self._native is not None:
            self._native.forget(eid)

    def items(self) -> list:
        """[(eid, (t_issue_ns, thread ident, op))] of the collectives not completed yet."""
        items = list(self._inflight.items())
        if self._native is not None:
            items += self._native.inflight()
        return items

    # -- completions --------------------------------------------------------------------
    def watch(self, w: LogWriter, eid: int, t_ret: int, out, issued: tuple | None) -> None:
        """Op `eid` returned `out` at `t_ret` and completes when its Work's future does.
        `issued`: (op, group name) of the op the thread issued last."""
        work = out[-1] if isinstance(out, tuple) else out
        if work is None:
            self.finish(w, eid, t_ret)
            return
        if issued in self.no_future:
            self.returned_only(w, eid, t_ret)
            return
        try:
            fut = _unbox_work(work).get_future()
        except RuntimeError:
            # gloo's P2P and reduce-scatter Work has no future: completion stays unknown
            # (docs/log-format.md). Asked once per op and group: the error captures a C++
            # backtrace, about 100 us of CPU.
            if issued is not None:
                self.no_future.add(issued)
            self.returned_only(w, eid, t_ret)
            return
        # The callback runs in a gloo thread: it only appends (atomic under the GIL, no lock,
        # no packing); the next record, or the watchdog within 0.2 s, writes it out.
        fut.add_done_callback(lambda f, eid=eid, r=t_ret: self._queue.append((eid, r, self._clock(), f)))

    def add(self, done: list) -> None:
        """Completions the compiled kernel took from its queue, in the queue's form (writer lock held)."""
        self._queue.extend(done)

    def drain_queued(self, w: LogWriter) -> None:
        """drain(), when completions wait in this queue (writer lock held)."""
        if self._queue:
            self.drain(w)

    def drain(self, w: LogWriter) -> None:
        """Turn futures completed since the last call into D records (writer lock held)."""
        q = self._queue
        if self._native is not None:
            done = self._native.take_done()
            if done:
                q.extend(done)
        while q:
            eid, t_ret, t_done, x = q.popleft()
            self.forget(eid)
            if x is not None and not isinstance(x, BaseException):
                try:
                    x.value()
                    x = None
                except BaseException as exc:  # the collective itself failed
                    x = exc
            if x is None:
                w.done(eid, t_ret, t_done)
                continue
            rec = {"k": lf.DONE, "i": eid, "r": t_ret, "e": f"{type(x).__name__}: {x}"[:2000]}
            self.note_failed(eid)
            if t_done is not None:
                rec["c"] = t_done
            w.queue(rec)

    def note_failed(self, eid: int) -> None:
        if len(self.failed) <= MAX_LISTED:  # (one more than listed: the checkpoint says "more")
            self.failed.append(eid)

    def returned_only(self, w: LogWriter, eid: int, t_ret: int) -> None:
        """Op `eid` returned; when it completes cannot be observed."""
        with w.lock:
            self.forget(eid)
            w.done(eid, t_ret, None)

    def finish(self, w: LogWriter | None, eid: int, t_ret: int, error: BaseException | None = None) -> None:
        """Op `eid` returned at `t_ret` and has completed now, or failed with `error`."""
        if w is None:
            return
        now = self._clock()
        with w.lock:
            self.forget(eid)
            if error is not None:
                rec = {"k": lf.DONE, "i": eid, "r": t_ret, "c": now, "e": f"{type(error).__name__}: {error}"[:2000]}
                self.note_failed(eid)
                w.write(rec)  # an error may be followed by a crash: write now
            else:
                w.done(eid, t_ret, now)
