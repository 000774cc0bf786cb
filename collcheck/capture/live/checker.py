"""Live mode, the checker: one thread on rank 0 reads the ranks' summaries (live.py) and asks
about what looks wrong (live_detect.py).

Cheap tests decide when to look; the post-mortem analysis decides what was found: at a
suspicion every rank is asked for its log through the store (gather.py: a snapshot in a private
folder of this host, complete when no host can read another's logs), which is handed to `python
-m collcheck.cli.live`, a process of its own started at the first one (the job imports no
analysis code), which runs `collcheck diff`'s analysis on it; only a finding there is reported.
A suspicion it clears is not raised again. When
rank 0 exits, its checker first looks at the other ranks' final summaries (a divergence that ran
through to the end, as NCCL lets it); ranks still running then, the lowest of them checks on.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time

import msgpack

from . import gather, share
from .detector import Detector, Suspicion
from .keys import ABORT_KEY, CHECKER_KEY, KEY_PREFIX, SIGNAL_KEY
from .publisher import OFF, turn_off

ANALYSIS_TIMEOUT_S = 120.0
EXIT_WAIT_S = 1.0  # rank 0 exits: how long it waits for the other ranks' final summaries
LAST_LOOK_S = 30.0  # and at most for an analysis of what they show: the exit is the job's
KEYS_PER_REQUEST = 512  # one multi_get of more keys takes TCPStore's (libuv) server disproportionately long
GATHER_WAIT_S = 3.0  # the ranks' logs waited for, past two of their intervals (a rank answers at its next turn)


class Checker(threading.Thread):
    """Reads every rank's summary, asks the analysis process about suspicions, reports once, and with
    COLLCHECK_LIVE_ACTION=abort asks every rank to end."""

    def __init__(self, store, world: int, run_dir: str, rank: int, config, current=None, restart: int = 0):
        super().__init__(name="collcheck-live-check", daemon=True)
        self.store = store
        self.world = world
        self.run_dir = run_dir
        self.rank = rank
        self.action = config.live_action
        self.interval = config.live_interval
        self.detector = Detector(world, config.live_hang_seconds, max(3 * config.live_interval, 2.0))
        self.keys = [f"{KEY_PREFIX}{r}" for r in range(world)]
        self.present: set[int] = set()
        self.analysis: subprocess.Popen | None = None
        self.closing = threading.Event()  # rank 0 exits: a last look at everyone's final summaries
        self.current = current  # () -> this rank's recorder (its log: answered here, its publisher may be done)
        self.restart = restart  # (a log a rank left in the store is of this restart, or stale)
        self.late: gather.Snapshot | None = None  # the last request's, its keys deleted at the next one

    def run(self) -> None:
        deadline = None
        try:
            while not OFF.is_set():
                if deadline is not None:
                    time.sleep(0.05)
                elif self.closing.wait(self.interval):
                    deadline = time.monotonic() + EXIT_WAIT_S
                now = time.monotonic()
                suspicion = self.detector.update(now, self.read())
                if suspicion is None and self.detector.frozen_waiting(now, self.detector.hang_s / 2):
                    self.start_analysis()  # ready before a hang is suspected: it answers sooner
                if suspicion is not None:
                    found = self.ask(suspicion)
                    if found and self.action == "abort":
                        self.store.set(ABORT_KEY, f"{found} (COLLCHECK_LIVE_ACTION=abort)")
                        self.store.add(SIGNAL_KEY, 1)
                    self.forget(keep_late=not found)  # (after the report and the abort: neither waits for it)
                    if found:
                        return
                    self.detector.clear(suspicion)
                if self.detector.finished():
                    return
                if deadline is not None and time.monotonic() > deadline:
                    self.hand_over()
                    return
        except Exception as exc:  # noqa: BLE001 - never let the checker harm the job
            turn_off(exc)
        finally:
            self.close()

    def read(self) -> dict[int, dict]:
        """Every rank's latest summary (ranks that have not published yet are left out), read
        KEYS_PER_REQUEST keys a request (benchmarks/bench_live_scale.py)."""
        for batch in _batches([r for r in range(self.world) if r not in self.present]):
            if self.store.check([self.keys[r] for r in batch]):  # (all of them published: one request)
                self.present.update(batch)
            elif len(batch) > 1:
                self.present.update(r for r in batch if self.store.check([self.keys[r]]))
        ranks = sorted(self.present)
        raws = [raw for batch in _batches(ranks) for raw in self.store.multi_get([self.keys[r] for r in batch])]
        out = {}
        for r, raw in zip(ranks, raws):
            try:
                s = msgpack.unpackb(raw, raw=False, strict_map_key=False)
            except Exception:
                continue
            if isinstance(s, dict):
                out[r] = s
        return out

    def ask(self, suspicion: Suspicion) -> str | None:
        """The analysis process's verdict on a suspicion, on the ranks' logs as they stand now: its
        first finding in one line, or None."""
        self.start_analysis()
        wall = time.time()
        snap = self.snapshot()
        try:
            return self.consult({"kind": suspicion.kind, "group": suspicion.group, "position": suspicion.position,
                                 "ranks": suspicion.ranks, "running": suspicion.running, "wall": wall,
                                 "snapshot": snap.folder, "logs": snap.notes, "ends": snap.ends_file,
                                 "world": self.world})
        finally:
            snap.remove()

    def forget(self, keep_late: bool = False) -> None:
        """Delete the last request's keys in the store; with `keep_late`, not yet when some rank did
        not answer in time (its answer may still come: deleted at the next request)."""
        if self.late is not None and not (keep_late and self.late.late):
            self.late.forget(self.store, self.world)
            self.late = None

    def snapshot(self) -> gather.Snapshot:
        """Every rank's log through the store (gather.py), this rank's answered here, last (its
        publisher may be done: this rank exits)."""
        self.forget()  # (the last request's: answers that came after its wait included)
        request = gather.ask(self.store)
        rec = self.current() if self.current is not None else None
        mine = (lambda: share.answer(rec, self.store, request)) if rec is not None and rec.writer is not None else None
        ended = set(self.detector.ranks) - set(self.detector.running())  # (they left their logs, or will)
        snap = gather.gather(self.store, request, self.world, self.restart, 2 * self.interval + GATHER_WAIT_S, ended,
                             mine)
        self.late = snap
        return snap

    def consult(self, request: dict) -> str | None:
        """The analysis process's answer to a request (its finding, or None)."""
        self.analysis.stdin.write((json.dumps(request) + "\n").encode())
        self.analysis.stdin.flush()
        # (not select.select, which fails past fd 1024: rank 0 may hold more, serving a big job's store)
        with selectors.DefaultSelector() as waiting:
            waiting.register(self.analysis.stdout, selectors.EVENT_READ)
            ready = waiting.select(ANALYSIS_TIMEOUT_S)
        line = self.analysis.stdout.readline() if ready else b""
        answer = json.loads(line) if line.strip() else {}
        return answer.get("finding")

    def start_analysis(self) -> None:
        """The analysis process, started once (it imports the analysis ahead of the first request)."""
        if self.analysis is None or self.analysis.poll() is not None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("COLLCHECK")}
            self.analysis = subprocess.Popen([sys.executable, "-m", "collcheck.cli.live", self.run_dir],
                                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def hand_over(self) -> None:
        """This rank exits while others still run: the lowest of them checks from now on (its
        publisher starts a checker: live.Publisher.take_over)."""
        others = [r for r in self.detector.running() if r != self.rank]
        if others:
            self.store.set(CHECKER_KEY, str(others[0]))
            self.store.add(SIGNAL_KEY, 1)

    def last_look(self, timeout: float = LAST_LOOK_S) -> None:
        """Rank 0 exits: compare the ranks' final summaries (a job that ran a divergence through to
        its end, as NCCL lets it) before the process, and this daemon thread with it, ends."""
        self.closing.set()
        self.join(timeout)

    def close(self) -> None:
        try:
            self.forget()
        except Exception:  # noqa: BLE001 - (the store is gone: so are they)
            pass
        p = self.analysis
        if p is not None and p.poll() is None:
            try:
                p.stdin.close()
                p.wait(timeout=5)
            except Exception:
                p.kill()


def _batches(ranks: list[int]) -> list[list[int]]:
    return [ranks[i:i + KEYS_PER_REQUEST] for i in range(0, len(ranks), KEYS_PER_REQUEST)]
