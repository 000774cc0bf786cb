"""Background thread: flushes queued records and dumps stacks of a rank stuck in a collective.

Also registers faulthandler for SIGTERM (what torchrun sends to the surviving ranks) and,
unless the user enabled faulthandler, for fatal signals (SIGABRT from a gloo check, SIGSEGV),
writing a text dump beside the log: no Python handler runs while the main thread is
blocked in C++, faulthandler does (capture.md).
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time

from ..logfile import format as lf
from .recorder import Recorder

FLUSH_INTERVAL_S = 0.2


class Watchdog(threading.Thread):
    def __init__(self, current):
        super().__init__(name="collcheck-watchdog", daemon=True)
        self.current = current  # () -> the live Recorder or None
        self.dumped: set[int] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(FLUSH_INTERVAL_S):
            rec = self.current()
            if rec is None:
                continue
            try:
                w = rec.writer
                if w is None or not rec.active:
                    continue
                with w.lock:
                    rec.drain_completions()
                    w.write()
                limit = rec.config.hang_seconds
                if limit > 0:
                    self._check(rec, limit)
            except Exception as exc:  # never let the thread die loudly inside the job
                rec.fail(exc)
                return

    def _check(self, rec: Recorder, limit: float) -> None:
        now = time.monotonic_ns()
        stuck = [(eid, v) for eid, v in rec.inflight_items() if (now - v[0]) / 1e9 > limit and eid not in self.dumped]
        if not stuck:
            return
        self.dumped.update(e for e, _ in stuck)
        rec.checkpoint("stuck")  # (what a post-mortem of a hung job compares first)
        rec.record(stacks_record(rec, min(stuck)))


def stacks_record(rec: Recorder, inflight: tuple) -> dict:
    """The W record of a rank stuck in a collective: every other thread's Python stack.
    `inflight`: (eid, (t_issue_ns, thread ident, op)) of the collective it waits in."""
    eid, (t_issue, _, op) = inflight
    now = time.monotonic_ns()
    threads = {t.ident: t.name for t in threading.enumerate()}
    stacks = []
    for tid, frame in sys._current_frames().items():
        if tid == threading.get_ident():
            continue
        frames = []
        while frame is not None:
            frames.append([frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name])
            frame = frame.f_back
        stacks.append({"id": tid, "n": threads.get(tid, "?"), "f": frames[::-1]})
    return {"k": lf.STACKS, "i": eid, "op": op, "waited_s": round((now - t_issue) / 1e9, 3), "ts": rec.now_us(),
            "threads": stacks}


_sigterm_file = None
_sigterm_path = None  # its name (the file object's is its descriptor's number)
_fatal_enabled = False  # faulthandler.enable() was ours


def register_sigterm_dump(log_path: str) -> None:
    """Dump all threads' stacks to `<log>.sigterm.txt` when the rank gets SIGTERM or dies of a
    fatal signal (that dump starts with 'Fatal Python error')."""
    global _sigterm_file, _sigterm_path
    if not hasattr(faulthandler, "register") or _sigterm_file is not None:
        return
    if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
        return  # the user handles SIGTERM: leave it alone
    path = log_path[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC  # a new file: never through a link
    try:
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:  # a stale one, or a link: its name goes, what it points to stays
            os.unlink(path)
            fd = os.open(path, flags, 0o644)
    except OSError:
        return  # no stack dump on SIGTERM; recording goes on
    _sigterm_file, _sigterm_path = os.fdopen(fd, "w"), path
    faulthandler.register(signal.SIGTERM, file=_sigterm_file, all_threads=True, chain=True)
    global _fatal_enabled
    if not faulthandler.is_enabled():  # fatal signals too (gloo's enforce failures SIGABRT): the
        # dump says which rank crashed; faulthandler re-raises the signal, so the exit is unchanged
        faulthandler.enable(file=_sigterm_file, all_threads=True)
        _fatal_enabled = True


def unregister_sigterm_dump() -> None:
    """Stop dumping; the file goes when nothing was written to it."""
    global _sigterm_path
    path, _sigterm_path = _sigterm_path, None
    f = _stop_dumps()
    if f is None:
        return
    try:
        empty = os.fstat(f.fileno()).st_size == 0  # (the file written to, whatever its name is now)
        f.close()
        if empty and path is not None:
            os.unlink(path)
    except Exception:
        pass


def forget_dump_in_child() -> None:
    """A forked child (DataLoader worker) must not dump into its parent's file (left open: the
    parent's)."""
    _stop_dumps()


def _stop_dumps():
    """Unregister our faulthandler dumps; returns the dump file, now no longer ours."""
    global _sigterm_file, _fatal_enabled
    f = _sigterm_file
    if f is None:
        return None
    try:
        faulthandler.unregister(signal.SIGTERM)
        if _fatal_enabled:
            faulthandler.disable()
    except Exception:
        pass
    _sigterm_file, _fatal_enabled = None, False
    return f
