"""When each recorded collective returned and completed: D records and the in-flight table.

Completions without an error ride inside the next C record (`d`, times relative to it: a few
bytes instead of a 24-byte D record; LogWriter.done), or become D records when no C record
comes (the watchdog's flush).

A blocking API call completes when its wrapper returns; anything else (async_op=True, C++
callers such as DDP's reducer) when its Work's future completes, which happens in a gloo
thread: the Python kernels' callback only appends to `_done_q`, the compiled path's callback
pushes onto a C++ queue (no GIL); both are drained into D records by the next record or by the
watchdog within 0.2 s. A mixin of Recorder.
"""

from __future__ import annotations

import threading
import time

import torch

from ..logfile import format as lf

_unbox_work = torch._C._distributed_c10d.Work.unbox


class Completions:
    """D records and the in-flight table (a mixin of Recorder)."""

    # -- in-flight table (the watchdog's) -----------------------------------------------
    def _track(self, eid: int, op: str) -> None:
        if self._fast is not None:
            self._fast.track(eid, time.monotonic_ns(), threading.get_ident(), op)
        else:
            self.inflight[eid] = (time.monotonic_ns(), threading.get_ident(), op)

    def _forget(self, eid: int) -> None:
        self.inflight.pop(eid, None)
        if self._fast is not None:
            self._fast.forget(eid)

    def inflight_items(self) -> list:
        """[(eid, (t_issue_ns, thread ident, op))] of the collectives not completed yet."""
        items = list(self.inflight.items())
        if self._fast is not None:
            items += self._fast.inflight()
        return items

    def on_return(self, eid: int, out, error: BaseException | None) -> None:
        """After the op returned: a blocking API call completes when its wrapper returns,
        anything else (async_op=True, C++ callers) when its Work's future completes."""
        t_ret = self.now_us()
        if error is not None:
            self.finish(eid, t_ret, error)
            return
        api = self.tls._api
        if api is not None and not api.async_op:
            api.returned[eid] = t_ret
            return
        work = out[-1] if isinstance(out, tuple) else out
        if work is None:
            self.finish(eid, t_ret)
            return
        issued = self.tls.issued
        if issued in self.no_future:
            self.returned_only(eid, t_ret)
            return
        try:
            fut = _unbox_work(work).get_future()
        except RuntimeError:
            # gloo's P2P and reduce-scatter Work has no future: completion stays unknown
            # (docs/log-format.md). Asked once per op and group: the error captures a C++
            # backtrace, about 100 us of CPU.
            if issued is not None:
                self.no_future.add(issued)
            self.returned_only(eid, t_ret)
            return
        # The callback runs in a gloo thread: it only appends (atomic under the GIL, no lock,
        # no packing); the next record, or the watchdog within 0.2 s, writes it out.
        fut.add_done_callback(lambda f, eid=eid, r=t_ret: self._done_q.append((eid, r, self.now_us(), f)))

    def drain_completions(self) -> None:
        """Turn futures completed since the last call into D records (writer lock held).

        Entries: (eid, returned, completed or None, Future | exception | None)."""
        q = self._done_q
        w = self.writer
        if self._fast is not None:
            done = self._fast.take_done()
            if done:
                q.extend(done)
        while q:
            eid, t_ret, t_done, x = q.popleft()
            self._forget(eid)
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
            if t_done is not None:
                rec["c"] = t_done
            w.queue(rec)

    def returned_only(self, eid: int, t_ret: int) -> None:
        w = self.writer
        with w.lock:
            self._forget(eid)
            w.done(eid, t_ret, None)

    def finish(self, eid: int, t_ret: int, error: BaseException | None = None) -> None:
        w = self.writer
        if w is None:
            return
        now = self.now_us()
        with w.lock:
            self._forget(eid)
            if error is not None:
                rec = {"k": lf.DONE, "i": eid, "r": t_ret, "c": now, "e": f"{type(error).__name__}: {error}"[:2000]}
                w.write(rec)  # an error may be followed by a crash: write now
            else:
                w.done(eid, t_ret, now)
