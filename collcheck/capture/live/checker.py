"""Live mode, the checker: one thread on rank 0 reads the ranks' summaries (live.py) and asks
about what looks wrong (live_detect.py).

Cheap tests decide when to look; the post-mortem analysis decides what was found: a suspicion
is handed to `python -m collcheck.cli.live`, a process of its own started at the first one (the job
imports no analysis code), which reads the run's logs as a snapshot and runs `collcheck diff`'s
analysis; only a finding there is reported. A suspicion it clears is not raised again. When
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

from .detector import Detector, Suspicion
from .publisher import ABORT_KEY, CHECKER_KEY, KEY_PREFIX, OFF, turn_off

ANALYSIS_TIMEOUT_S = 120.0
EXIT_WAIT_S = 1.0  # rank 0 exits: how long it waits for the other ranks' final summaries
LAST_LOOK_S = 30.0  # and at most for an analysis of what they show: the exit is the job's
KEYS_PER_REQUEST = 512  # one multi_get of more keys takes TCPStore's (libuv) server disproportionately long


class Checker(threading.Thread):
    """Reads every rank's summary, asks the analysis process about suspicions, reports once, and with
    COLLCHECK_LIVE_ACTION=abort asks every rank to end."""

    def __init__(self, store, world: int, run_dir: str, rank: int, config):
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
                    if found:
                        if self.action == "abort":
                            self.store.set(ABORT_KEY, f"{found} (COLLCHECK_LIVE_ACTION=abort)")
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
        """The analysis process's verdict on a suspicion: its first finding in one line, or None."""
        self.start_analysis()
        request = {"kind": suspicion.kind, "group": suspicion.group, "position": suspicion.position,
                   "ranks": suspicion.ranks, "running": suspicion.running, "wall": time.time()}
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

    def last_look(self, timeout: float = LAST_LOOK_S) -> None:
        """Rank 0 exits: compare the ranks' final summaries (a job that ran a divergence through to
        its end, as NCCL lets it) before the process, and this daemon thread with it, ends."""
        self.closing.set()
        self.join(timeout)

    def close(self) -> None:
        p = self.analysis
        if p is not None and p.poll() is None:
            try:
                p.stdin.close()
                p.wait(timeout=5)
            except Exception:
                p.kill()


def _batches(ranks: list[int]) -> list[list[int]]:
    return [ranks[i:i + KEYS_PER_REQUEST] for i in range(0, len(ranks), KEYS_PER_REQUEST)]
