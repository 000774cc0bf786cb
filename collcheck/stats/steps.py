"""Training steps and the share of each spent inside collectives.

A step ends where the job's first optimizer finished one (the recorder's O records, from
torch.optim's global post-step hook): per rank, a step runs from one `optimizer.step()` to the
next. Per step: its wall time and the time inside collectives (issue to completion, clipped to
the step, overlapping ones counted once), medians over ranks.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from ..model import Run
from ..model.timing import Timings
from .sample import Sample, median


@dataclass
class Steps:
    count: int  # steps measured (between two optimizer steps), on the rank with the most
    wall_s: list[float]  # per step, median over ranks
    comm_s: list[float]  # per step, median over ranks: time inside collectives

    @property
    def share(self) -> float:
        """Time inside collectives over wall time (medians over the steps)."""
        wall = statistics.median(self.wall_s)
        return statistics.median(self.comm_s) / wall if wall > 0 else 0.0


def _busy_us(intervals: list[tuple[int, int]]) -> int:
    """Length of the union of [start, end) intervals."""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total, end = total + b - a, b
        elif b > end:
            total, end = total + b - end, b
    return total


def training_steps(run: Run, timings: Timings) -> Steps | None:
    """None when no rank's optimizer stepped twice (no optimizer, or an older log). `timings`:
    model.Timings; ranks with equal columns and equal steps measured once."""
    units: dict[tuple, int] = {}  # (fold, its steps) -> ranks
    for rank, log in run.ranks.items():
        bounds = [log.base_us + ts for ts, opt in log.steps if opt == 0]
        if len(bounds) >= 2:
            key = (timings.fold_of[rank], tuple(bounds))
            units[key] = units.get(key, 0) + 1
    if not units:
        return None
    walls: dict[int, list] = {}  # step -> [(its wall s, ranks)]
    comms: dict[int, list] = {}
    for (f, bounds), n in units.items():
        t = timings.folds[f].t
        for k, (wall, comm) in enumerate(zip(*_measure(t.issue[t.has_done], t.done[t.has_done], list(bounds)))):
            walls.setdefault(k, []).append((wall, n))
            comms.setdefault(k, []).append((comm, n))
    return Steps(len(walls), [_median(walls[k]) for k in sorted(walls)], [_median(comms[k]) for k in sorted(comms)])


def _median(values: list[tuple[float, int]]) -> float:
    return median(Sample(np.array([v for v, _ in values]), np.array([n for _, n in values])))


def _measure(issue: np.ndarray, done: np.ndarray, bounds: list) -> tuple[list[float], list[float]]:
    """Per step (from one bound to the next): its wall time and the time inside collectives, s."""
    walls = [(b - a) / 1e6 for a, b in zip(bounds, bounds[1:])]
    if not len(issue):  # (no collective completed: a log damaged early)
        return walls, [0.0] * len(walls)
    if issue.dtype == object or done.dtype == object or np.any(np.diff(issue) < 0) or np.any(done < issue):
        return walls, _busy_loop(issue.tolist(), done.tolist(), bounds)
    # the union of the intervals (issued in order: pieces from a running largest completion)
    new = np.ones(len(issue), dtype=bool)
    reach = np.maximum.accumulate(done)
    new[1:] = issue[1:] > reach[:-1]
    starts = np.flatnonzero(new)
    lo, hi = issue[starts], reach[np.append(starts[1:], len(issue)) - 1]
    before = np.concatenate([[0], np.cumsum(hi - lo)])  # busy time before each piece

    def busy_until(x: np.ndarray) -> np.ndarray:
        j = np.searchsorted(lo, x, side="left")  # pieces starting before x
        inside = np.minimum(x - lo[np.maximum(j - 1, 0)], (hi - lo)[np.maximum(j - 1, 0)])
        return before[j] - np.where(j > 0, (hi - lo)[np.maximum(j - 1, 0)] - inside, 0)

    edge = np.array(bounds, dtype=np.int64)
    busy = np.diff(busy_until(edge)) if len(lo) else np.zeros(len(walls), dtype=np.int64)
    return walls, [int(b) / 1e6 for b in busy.tolist()]


def _busy_loop(starts: list, ends: list, bounds: list) -> list[float]:
    """Each step's time inside collectives, interval by interval (times out of int64's range, or out
    of order)."""
    out = []
    for k in range(len(bounds) - 1):
        begin, end = bounds[k], bounds[k + 1]
        spans = [(max(a, begin), min(b, end)) for a, b in zip(starts[:bisect_left(starts, end)], ends)
                 if b > begin and a < end]
        out.append(_busy_us(spans) / 1e6)
    return out
