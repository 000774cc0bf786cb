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

from ..model import Run
from ..model.timing import Timings


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
    model.Timings."""
    walls: dict[int, list[float]] = {}
    comms: dict[int, list[float]] = {}
    for rank, log in run.ranks.items():
        bounds = [log.base_us + ts for ts, opt in log.steps if opt == 0]
        if len(bounds) < 2:
            continue
        t = timings[rank]
        starts, ends = t.issue[t.has_done].tolist(), t.done[t.has_done].tolist()
        for k in range(len(bounds) - 1):
            begin, end = bounds[k], bounds[k + 1]
            spans = [(max(a, begin), min(b, end)) for a, b in zip(starts[:bisect_left(starts, end)], ends)
                     if b > begin and a < end]
            walls.setdefault(k, []).append((end - begin) / 1e6)
            comms.setdefault(k, []).append(_busy_us(spans) / 1e6)
    if not walls:
        return None
    return Steps(len(walls), [statistics.median(walls[k]) for k in sorted(walls)],
                 [statistics.median(comms[k]) for k in sorted(comms)])
