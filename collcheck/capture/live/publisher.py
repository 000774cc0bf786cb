"""Live mode, the rank's side: what each rank publishes through the job's store while it runs.

Per group, the recorder keeps the count of collectives issued, a rolling hash of their
signatures and the signatures of the last RING positions (tables.LiveTables, native/fastpath.cpp: a
multiply, an add and a store per collective). Every `live_interval` seconds a thread of its own
publishes them with the rank's progress (events issued, the oldest collective in flight) under
KEY_PREFIX + rank, through a clone of the default group's store (the job's TCPStore: across
nodes, no new service; a clone is its own connection, so a slow store never holds the job's
client, and its short timeout is ours alone). Rank 0 compares them (live_check.py). When the
checker asks for the logs (a request, keys.py), the thread answers with this rank's log
(share.py). Beside its summary, a turn reads one key when the checker has asked nothing: the
signal counter (keys.py), and the keys it stands for only when it moved.

The thread also ends the rank when the checker asks (COLLCHECK_LIVE_ACTION=abort): it writes
the watchdog's stacks record for the collective the rank is stuck in, then exits, so that the
post-mortem reads the rank as stuck there, not as crashed. A store that fails turns live mode
off with one warning; a pause of recording is published once, then nothing until it resumes.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
import threading
import time
import warnings

import msgpack

from ..watchdog import stacks_record, unregister_sigterm_dump
from . import share
from .keys import ABORT_KEY, CHECKER_KEY, KEY_PREFIX, REQUEST_KEY, SIGNAL_KEY

STORE_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 1.0
ABORT_EXIT_CODE = 1
VERSION = 1


def summary(rec, seq: int) -> dict:
    """The rank's summary now (writer lock taken here): per group and P2P channel what it issued
    (Recorder.live_state); events issued; the oldest collective in flight [eid, age s, op, count]."""
    w = rec.writer
    with w.lock:
        if rec.active:
            rec.drain_completions()  # (completions the watchdog has not taken yet: not in flight)
        state = rec.live_state()
        issued = rec.events_issued()
        inflight = rec.inflight_items()
    now = time.monotonic_ns()
    out = {"v": VERSION, "r": rec.rank, "q": seq, "e": issued, **state}
    if inflight:
        eid, (t_ns, _, op) = min(inflight)
        out["f"] = [eid, round((now - t_ns) / 1e9, 3), op, len(inflight)]
    call = rec.in_call
    if call is not None:  # waiting for every rank in a group creation
        out["w"] = [call[0], round((now - call[1]) / 1e9, 3)]
    if rec.failed:  # recording stopped after an internal error: its counts end there
        out["x"] = 1
    return out


def live_store():
    """A clone of the default group's store with our own timeout, or None (no default group)."""
    from torch.distributed import distributed_c10d as c10d

    if not c10d.is_initialized():
        return None
    store = c10d._get_default_store().clone()
    store.set_timeout(datetime.timedelta(seconds=STORE_TIMEOUT_S))
    return store


def reachable(store) -> bool:
    """Whether the TCPStore server under `store` still takes connections: one connect. Without
    torchrun's agent, rank 0 serves the job's store, and the server goes with its default group;
    torch logs a C++ backtrace for every request to a server that is gone, so a rank's last words
    (its final summary, its closed log) are sent only where this says yes. Other stores: True."""
    inner = store
    for _ in range(16):  # (PrefixStores wrap it; a bounded walk)
        below = getattr(inner, "underlying_store", None)
        if below is None:
            break
        inner = below
    host, port = getattr(inner, "host", None), getattr(inner, "port", None)
    if not isinstance(host, str) or not isinstance(port, int) or port <= 0:
        return True
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
    except OSError:
        return False
    return True


class Publisher(threading.Thread):
    """Publishes this rank's summary every `interval` s and ends the rank when the checker asks."""

    def __init__(self, current, store, rank: int, interval: float, take_over=None):
        super().__init__(name="collcheck-live", daemon=True)
        self.current = current  # () -> the live Recorder or None
        self.store = store
        self.rank = rank
        self.key = f"{KEY_PREFIX}{rank}"
        self.take_over = take_over  # (rec) -> None: start checking here (the checking rank exited)
        self.interval = interval
        self.seq = 0
        self.progress = None  # (events issued, oldest in flight, in flight) at the last change
        self.changed = time.monotonic()
        self.signal = None  # the signal counter when last read (None: read every key once)
        self.stop = threading.Event()

    def run(self) -> None:
        paused = False
        while not self.stop.wait(self.interval) and not OFF.is_set():
            rec = self.current()
            if rec is None or rec.writer is None:
                continue
            try:
                if not rec.active:  # paused: one summary saying so (a pause is no hang), then nothing
                    if not paused:
                        self.publish(rec, "p")
                    paused = True
                    continue
                paused = False
                self.publish(rec)
                self.react(rec)
            except Exception as exc:  # noqa: BLE001 - the store went away or refused: live mode off
                turn_off(exc)
                return

    def publish(self, rec, state: str | None = None) -> None:
        self.seq += 1
        s = summary(rec, self.seq)
        f = s.get("f") or [None, 0, None, 0]
        progress = (s["e"], f[0], f[3], (s.get("w") or [None])[0])
        now = time.monotonic()
        if progress != self.progress:
            self.progress, self.changed = progress, now
        s["m"] = round(now - self.changed, 3)  # seconds since this rank last issued or completed anything
        if state is not None:
            s["s"] = state
        self.store.set(self.key, msgpack.packb(s))

    def react(self, rec) -> None:
        """What the checker set since the last turn: the abort, the hand-over of the checking, a
        request for the logs. One read (the signal counter) when it set nothing."""
        signal = self.store.add(SIGNAL_KEY, 0)
        if signal == self.signal:
            return
        self.signal = signal
        if self.store.check([ABORT_KEY]):
            abort_rank(rec, self.store.get(ABORT_KEY).decode(errors="replace"))
        if self.take_over is not None and self.designated():
            self.take_over(rec)
            self.take_over = None
        if self.store.check([REQUEST_KEY]):
            request = self.store.get(REQUEST_KEY)
            if request.isdigit() and len(request) < 24 and int(request) > 0:
                share.answer(rec, self.store, int(request))

    def designated(self) -> bool:
        """The checking rank exited and handed the checking to this one."""
        return self.store.check([CHECKER_KEY]) and self.store.get(CHECKER_KEY) == str(self.rank).encode()

    def halt(self) -> None:
        """Stop the thread's turns (and wait for the one under way)."""
        self.stop.set()
        if self.is_alive() and self is not threading.current_thread():
            self.join(2 * self.interval + STORE_TIMEOUT_S)

    def final(self, rec, state: str) -> bool:
        """The rank is done ("end") or raised ("err"): the checker stops waiting for it. False: the
        store refused the last summary."""
        self.halt()
        try:
            self.publish(rec, state)
        except Exception:
            return False
        return not OFF.is_set()


OFF = threading.Event()  # live mode was turned off in this process (the store failed, or a bug of ours)


def turn_off(exc: BaseException) -> None:
    """Stop publishing and checking in this process; say so once."""
    if not OFF.is_set():
        OFF.set()
        warnings.warn(f"collcheck: live mode off ({type(exc).__name__}: {exc}); recording goes on",
                      RuntimeWarning, stacklevel=2)


def abort_rank(rec, reason: str) -> None:
    """COLLCHECK_LIVE_ACTION=abort: say why on stderr, record where the rank waits (the watchdog's
    stacks record: the post-mortem reads the rank as stuck there), flush the log and exit."""
    print(f"collcheck live: ending rank {rec.rank}: {reason}", file=sys.stderr, flush=True)
    try:
        inflight = rec.inflight_items()
        if inflight:
            rec.record(stacks_record(rec, min(inflight)))
        with rec.writer.lock:
            rec.drain_completions()
            rec.writer.write()
        unregister_sigterm_dump()
    finally:
        os._exit(ABORT_EXIT_CODE)
