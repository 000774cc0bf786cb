"""When the next shared recording may start: when the machine has a core to spare.

A job's ranks import torch and start together; under CPU contention one rank can fall seconds
behind its peers and a program's short group timeout (6 s in the scenarios) fires at a correct
collective. So a recording starts only when the last half second left a good share of the CPUs
idle (a hang waiting out its timeout leaves them idle: another job fills that time), never more
than `max_jobs` at once, and always when none runs. While a job whose timing is under test
(`exclusive`: live mode's report within seconds) runs, at most one other job runs beside it.
"""

from __future__ import annotations

import threading
import time

IDLE_SHARE = 0.25  # of all CPUs, idle over the last half second
SPACING_S = 1.0  # between two starts: a job's own start-up has not shown in the idle time yet
QUIET_JOBS = 2  # jobs at once while one whose timing is under test runs (it and one other)


def _cpu_times() -> tuple[int, int] | None:
    """(idle, total) jiffies of all CPUs since boot (None: no /proc/stat, e.g. not Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + fields[4], sum(fields[:8])


class Admission:
    def __init__(self, max_jobs: int):
        self.max_jobs = max(1, max_jobs)
        self.running = 0
        self.quiet = 0  # exclusive jobs running
        self.issued = self.served = 0  # tickets: jobs start in the order they asked
        self.last_start = 0.0
        self.cond = threading.Condition()

    def _idle_share(self) -> float:
        a = _cpu_times()
        time.sleep(0.5)
        b = _cpu_times()
        if a is None or b is None or b[1] == a[1]:
            return 1.0
        return (b[0] - a[0]) / (b[1] - a[1])

    def start(self, exclusive: bool = False) -> None:
        """Wait for this job's turn (first come, first served), then for room to start it."""
        with self.cond:
            ticket, self.issued = self.issued, self.issued + 1
        while True:
            with self.cond:
                limit = QUIET_JOBS if exclusive or self.quiet else self.max_jobs
                if ticket == self.served and (
                        self.running == 0 or (self.running < limit
                                              and time.monotonic() - self.last_start >= SPACING_S
                                              and self._idle_share() >= IDLE_SHARE)):
                    self.running += 1
                    self.served += 1
                    self.quiet += exclusive
                    self.last_start = time.monotonic()
                    self.cond.notify_all()
                    return
                self.cond.wait(0.25)

    def done(self, exclusive: bool = False) -> None:
        with self.cond:
            self.running -= 1
            self.quiet -= exclusive
            self.cond.notify_all()

