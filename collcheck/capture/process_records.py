"""The records that are not collectives: group lifecycle, calls on a group the rank is not in, sync
points, a receive's sender, optimizer steps, the process's uncaught exception and its end.

Each takes the writer lock itself and never raises into the job where the job goes on (a failure
stops recording through Recorder.fail)."""

from __future__ import annotations

from ..logfile import format as lf
from ..logfile.writer import LogWriter
from . import callsite


class ProcessRecords:
    """One recorder's records of what happens around the collectives."""

    def __init__(self, rec):
        self._rec = rec  # recorder.Recorder: writer, clock, group and thread ids, fail
        self._optimizers: dict[int, int] = {}  # id(optimizer) -> its index in O records, by first step

    def _site(self, w: LogWriter, frame):
        chain, names, stack, _ = callsite.walk(frame, self._rec.config.full_stack)
        user = chain[0] if chain else None
        site = None if user is None else w.site_id(user.f_code.co_filename, user.f_lineno, user.f_code.co_name)
        full = None if stack is None else [w.site_id(*f) for f in stack]
        return site, names, full

    def record(self, r: dict) -> None:
        w = self._rec.writer
        if w is None:
            return
        with w.lock:
            w.write(r)

    def record_exception(self, exc: BaseException) -> None:
        """X record: type, message and where it was raised (innermost user frame of the traceback)."""
        w = self._rec.writer
        if w is None:
            return
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame.f_code, tb.tb_lineno))
            tb = tb.tb_next
        user = [f for f in frames if callsite._classify(f[0])[0]] or frames[-1:]
        with w.lock:
            r = {"k": lf.EXCEPTION, "t": type(exc).__name__, "m": str(exc)[:2000], "ts": self._rec.now_us()}
            if user:
                code, line = user[-1]
                r["s"] = w.site_id(code.co_filename, line, code.co_name)
            w.write(r)

    def record_non_member(self, name: str, frame) -> None:
        """N record: public call `name` on a group this rank is not in (torch_api.py)."""
        rec = self._rec
        w = rec.writer
        with w.lock:
            site, _, _ = self._site(w, frame)
            r = {"k": lf.NON_MEMBER, "ts": rec.now_us(), "x": w.string_id(name), "h": rec.thread_id(w)}
            if site is not None:
                r["s"] = site
            w.write(r)

    def record_group(self, op: str, pg, ranks, desc, frame, extra=None) -> None:
        rec = self._rec
        w = rec.writer
        if w is None:
            return
        with w.lock:
            site, _, _ = self._site(w, frame)
            r = {"k": lf.GROUP, "op": op, "ts": rec.now_us()}
            if pg is not None and hasattr(pg, "group_name"):
                r["gid"] = rec.group_id(w, pg)
                r["g"] = pg.group_name
            if ranks is not None:
                r["r"] = list(ranks)
            if desc:
                r["d"] = desc
            if site is not None:
                r["s"] = site
            if extra:
                r.update(extra)
            w.keep(r)  # a later segment repeats the group's creation
            w.write()

    def on_sync(self, frame, eid: int | None, what: str) -> None:
        """The CPU thread is about to wait at a sync point for collective `eid` (a backend whose
        calls return at once, collcheck.simnccl): where it waits is not where its last collective
        was issued. Written at once: the watchdog may abort the process while it waits."""
        w = self._rec.writer
        with w.lock:
            chain = callsite.walk(frame, False)[0]
            r = {"k": lf.SYNC, "ts": self._rec.now_us(), "w": what}
            if chain:
                code = chain[0].f_code
                r["s"] = w.site_id(code.co_filename, chain[0].f_lineno, code.co_name)
            if eid is not None:
                r["i"] = eid
            w.write(r)

    def note_source(self, eid: int, rank: int) -> None:
        """The sender a receive returned: a U record, written with the next record (never raises)."""
        w = self._rec.writer
        if w is None:
            return
        try:
            with w.lock:
                w.queue({"k": lf.SOURCE, "i": eid, "p": rank})
        except Exception as exc:  # noqa: BLE001 - the job goes on; recording stops with one warning
            self._rec.fail(exc)

    def on_optimizer_step(self, optimizer) -> None:
        """An optimizer finished a step (torch.optim's global hook, session.py): an O record, queued
        to ride with the next write (training steps for `collcheck stats`)."""
        rec = self._rec
        w = rec.writer
        if w is None or not rec.active:
            return
        with w.lock:
            index = self._optimizers.setdefault(id(optimizer), len(self._optimizers))
            r = {"k": lf.STEP, "ts": rec.now_us()}
            if index:
                r["o"] = index
            w.queue(r)
