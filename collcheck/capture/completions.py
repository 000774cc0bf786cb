"""When each recorded collective returned and completed: D records and the in-flight table.

Completions without an error ride inside the next C record (`d`, times relative to it: a few
bytes instead of a 24-byte D record; LogWriter.done), or become D records when no C record
comes (the watchdog's flush).

A blocking API call completes when its wrapper returns (the recorder's ApiCall keeps its return
time); anything else (async_op=True, C++ callers such as DDP's reducer) when its Work's future
completes, which happens in a gloo thread: the Python kernels' callback only appends to the
queue here, the compiled path's callback pushes onto a C++ queue (no GIL); both are drained into
D records by the next record or by the watchdog within 0.2 s.

On backends whose futures complete at enqueue (NCCL: a CUDA future; the simulated NCCL backend),
neither the future nor a blocking call's return says the collective ran: their Works are kept
(`keep_polled`; the compiled path keeps its own in C++) and the poller thread (poller.py) asks
each `is_completed()`, which on NCCL queries the kernel's end event. The completion time is when
the poller saw it: at most one polling interval late.
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
from .engine_python import PythonEngine

POLL_BATCH = 4096  # Works asked per polling round (the oldest first): bounds one round's time
_unbox_work = torch._C._distributed_c10d.Work.unbox


class Completions:
    """One recorder's completions not written yet; the in-flight table (the watchdog's) is its
    engine's, and on the compiled path the kernels' own completions and polled Works are too."""

    def __init__(self, clock: Callable[[], int], engine=None):
        self._clock = clock  # µs since the recorder's origin (Recorder.now_us)
        self._engine = engine if engine is not None else PythonEngine()  # the recorder's (use_engine)
        # (eid, returned, completed or None, Future | exception | None), not written yet
        self._queue: deque = deque()
        self.no_future: set[tuple] = set()  # (op, group name) whose Work has no future
        self.failed: list[int] = []  # collectives that raised (their first MAX_LISTED): checkpoints
        # groups whose Works are polled -> whether their backend's futures complete at enqueue (False:
        # polled on request, COLLCHECK_COMPLETION=poll, where a Work without a future is not polled)
        self.polled_groups: dict[str, bool] = {}
        self._kept: deque = deque()  # (eid, returned, Work) polled, not seen complete yet
        self._kept_eids: set[int] = set()  # of those, the ones no other path finished

    def use_engine(self, engine) -> None:
        """Keep the in-flight table in `engine` (the recorder's), and take its completions from there."""
        self._engine = engine

    def after_fork_in_child(self) -> None:
        """A forked child: the parent's collectives are not in flight in it (nor in its engine)."""
        self.failed = []
        self._kept = deque()
        self._kept_eids = set()

    # -- in-flight table ------------------------------------------------------------------
    def track(self, eid: int, op: str) -> None:
        self._engine.track(eid, time.monotonic_ns(), threading.get_ident(), op)

    def forget(self, eid: int) -> None:
        self._kept_eids.discard(eid)
        self._engine.forget(eid)

    def items(self) -> list:
        """[(eid, (t_issue_ns, thread ident, op))] of the collectives not completed yet."""
        return self._engine.inflight()

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

    def keep_polled(self, eid: int, t_ret: int, work, issued: tuple | None = None) -> bool:
        """Op `eid` returned at `t_ret`; it completes when `work.is_completed()` says so (poll). False
        (not kept): a Work without a future on a backend whose futures are truthful (gloo's P2P and
        reduce-scatter, whose is_completed() never turns true): the usual rules apply to it."""
        if work.__class__ is torch.ScriptObject:
            work = _unbox_work(work)
        if issued is not None and not self.polled_groups.get(issued[1], True):
            if issued in self.no_future:
                return False
            try:
                work.get_future()
            except RuntimeError:  # (asked once per op and group, as watch does)
                self.no_future.add(issued)
                return False
        self._kept_eids.add(eid)
        self._kept.append((eid, t_ret, work))
        return True

    def poll(self, batch: int = POLL_BATCH) -> int:
        """Ask up to `batch` kept Works (the compiled path's too) whether they completed; queue those
        that did with the time seen now. Returns how many are still kept. The poller's thread only:
        it alone takes from `_kept` (appends from other threads are atomic)."""
        kept = self._kept
        now = self._clock()
        for _ in range(min(batch, len(kept))):
            item = kept.popleft()
            eid = item[0]
            if eid not in self._kept_eids:
                continue  # finished by another path (a failure written at once)
            try:
                done = item[2].is_completed()
                error = None if not done or item[2].is_success() else _work_error(item[2])
            except Exception as exc:  # noqa: BLE001 - asking failed: the collective's own error
                done, error = True, exc
            if done:
                self._queue.append((eid, item[1], now, error))
            else:
                kept.append(item)
        return len(kept) + self._engine.poll(batch)

    def add(self, done: list) -> None:
        """Completions the compiled kernel took from its queue, in the queue's form (writer lock held)."""
        self._queue.extend(done)

    def has_queued(self) -> bool:
        """Whether completions wait to be written (the compiled path's too)."""
        return bool(self._queue) or self._engine.has_done()

    def drain_queued(self, w: LogWriter) -> None:
        """drain(), when completions wait in this queue (writer lock held)."""
        if self._queue:
            self.drain(w)

    def drain(self, w: LogWriter) -> None:
        """Turn futures completed since the last call into D records (writer lock held)."""
        q = self._queue
        done = self._engine.take_done()
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


def _work_error(work) -> BaseException:
    """The error of a Work that completed without success."""
    try:
        exc = work.exception()
    except Exception as err:  # noqa: BLE001 - c10d raises it instead of returning it
        return err
    return exc if isinstance(exc, BaseException) else RuntimeError("the collective failed")
