"""Every statistic of one run, computed once: what the CLI, the TUI's stats view and the Perfetto
export all show."""

from __future__ import annotations

from dataclasses import dataclass

from ..base import collector
from ..model import Run
from .concurrency import HostLoad, host_load
from .groups import group_hints
from .hints import Hint, hints
from .sites import GroupStats, SiteStats, rank_events, site_stats
from .skew import Skew, arrival_skew
from .steps import Steps, training_steps


@dataclass
class Stats:
    run: Run
    events: dict[int, list]  # rank -> its events (sites.rank_events)
    sites: list[SiteStats]  # most time first
    groups: dict[str, GroupStats]
    skew: Skew
    hints: list[Hint]  # most time to gain first
    steps: Steps | None
    hosts: list[HostLoad]  # most ranks first


def compute(run: Run) -> Stats:
    """Every statistic of the run (the cycle collector paused meanwhile: base/collector.py)."""
    with collector.paused():
        return _compute(run)


def _compute(run: Run) -> Stats:
    events = rank_events(run)
    sites, groups = site_stats(run, events)
    skew = arrival_skew(run, events)
    hosts = host_load(run, events)
    found = sorted(hints(run, sites, skew, events, hosts) + group_hints(run, groups, hosts), key=lambda h: -h.gain_s)
    return Stats(run, events, sites, groups, skew, found, training_steps(run, events), hosts)
