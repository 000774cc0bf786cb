"""Every statistic of one run, computed once: what the CLI, the TUI's stats view and the Perfetto
export all show."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ..base import collector
from ..model import Run
from ..model.timing import Timings
from .concurrency import HostLoad, host_load
from .groups import group_hints
from .hints import Hint, hints
from .sites import GroupStats, SiteStats, rank_events, site_stats
from .skew import Skew, arrival_skew
from .steps import Steps, training_steps


@dataclass
class Stats:
    run: Run
    timings: Timings  # rank -> its collectives' times, sites and sizes (model/timing.py)
    sites: list[SiteStats]  # most time first
    groups: dict[str, GroupStats]
    skew: Skew
    hints: list[Hint]  # most time to gain first
    steps: Steps | None
    hosts: list[HostLoad]  # most ranks first

    @cached_property
    def events(self) -> dict[int, list]:
        """rank -> its decoded events (what the Perfetto export draws), decoded when first asked."""
        return rank_events(self.run, self.timings)


def compute(run: Run, fold: bool = True) -> Stats:
    """Every statistic of the run (the cycle collector paused meanwhile: base/collector.py); the
    ranks with equal columns counted once (`fold=False`: each alone, the same results, slower)."""
    with collector.paused():
        return _compute(run, fold)


def _compute(run: Run, fold: bool) -> Stats:
    timings = Timings(run, fold)
    sites, groups = site_stats(run, timings)
    skew = arrival_skew(run, timings)
    hosts = host_load(run, timings)
    found = sorted(hints(run, sites, skew, timings, hosts) + group_hints(run, groups, hosts), key=lambda h: -h.gain_s)
    return Stats(run, timings, sites, groups, skew, found, training_steps(run, timings), hosts)
