"""How many groups communicate at once on each host, and what a collective costs at each count.

Ranks of one host share its CPUs and its scheduler. On gloo a collective passes through its
members' threads (the caller, the group's worker, the transport's event loop: a small all-reduce
of two ranks is about a dozen messages, each a wake-up), so groups that communicate at the same
time on one host may slow each other down, or not: this measures it. Per host: its ranks, the
CPUs each may run on and torch's intra-op threads (from the log headers), and for every completed
collective the number of groups (its own included) with a collective in flight at its midpoint
on that host, read from a sweep over the groups' busy intervals; then the median time at each
count of the host's most frequent kind of collective (one op and size: mixing sizes would
compare unlike with unlike).
"""

from __future__ import annotations

import statistics
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate

from ..model import P2P_OPS, Run

MIN_SAMPLES = 10  # collectives timed at one count of groups at once, to compare it with another


@dataclass
class HostLoad:
    host: str
    ranks: list[int]
    cpus: int | None  # CPUs a rank may run on (the smallest of its ranks'); None in older logs
    threads: int | None  # torch's intra-op threads per rank (the largest)
    groups: list[str] = field(default_factory=list)  # groups with collectives on this host
    sample: tuple[str, int] | None = None  # (api, bytes): the kind of collective timed in by_count
    sample_site: tuple | None = None  # where most of them were issued
    by_count: dict[int, list[float]] = field(default_factory=dict)  # groups at once -> its durations µs

    @property
    def cpus_text(self) -> str:
        return "? CPUs" if self.cpus is None else f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}"

    def median_us(self, count: int) -> float | None:
        d = self.by_count.get(count)
        return statistics.median(d) if d else None

    def mean_us(self, count: int) -> float | None:
        d = self.by_count.get(count)
        return statistics.fmean(d) if d else None

    def comparison(self) -> tuple[int, float, int, float] | None:
        """(fewest groups at once, its median µs, most groups at once, its median µs) over the counts
        with at least MIN_SAMPLES collectives; None without two such counts."""
        counts = sorted(k for k, v in self.by_count.items() if len(v) >= MIN_SAMPLES)
        if len(counts) < 2:
            return None
        return counts[0], self.median_us(counts[0]), counts[-1], self.median_us(counts[-1])

    @property
    def mean_at_once(self) -> float:
        n = sum(len(v) for v in self.by_count.values())
        return sum(k * len(v) for k, v in self.by_count.items()) / n if n else 0.0


def _union(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def host_load(run: Run, events: dict[int, list]) -> list[HostLoad]:
    """One entry per host, most ranks first. `events`: sites.rank_events."""
    hosts: dict[str, list[int]] = {}
    for rank, log in run.ranks.items():
        hosts.setdefault(str(log.header.get("host", "?")), []).append(rank)
    out = []
    for host, ranks in hosts.items():
        headers = [run.ranks[r].header for r in ranks]
        cpus = [h["cpus"] for h in headers if isinstance(h.get("cpus"), int)]
        threads = [h["threads"] for h in headers if isinstance(h.get("threads"), int)]
        load = HostLoad(host, sorted(ranks), min(cpus) if cpus else None, max(threads) if threads else None)
        done = [e for r in ranks for e in events[r]
                if e.t_done is not None and e.error is None and e.sig.op not in P2P_OPS]
        busy: dict[str, list[tuple[int, int]]] = {}
        for e in done:
            busy.setdefault(e.group, []).append((e.t_issue, max(e.t_done, e.t_issue + 1)))
        load.groups = sorted(busy)
        # +1 where a group's busy interval starts, -1 where it ends: groups active at any instant
        edges = sorted((t, d) for spans in busy.values() for a, b in _union(spans) for t, d in ((a, 1), (b, -1)))
        times = [t for t, _ in edges]
        active = list(accumulate(d for _, d in edges))
        kinds = Counter((e.sig.api, e.sized.nbytes) for e in done)
        if kinds:
            load.sample = kinds.most_common(1)[0][0]
        sites: Counter = Counter()
        for e in done:
            if (e.sig.api, e.sized.nbytes) != load.sample:
                continue
            sites[e.site] += 1
            mid = (e.t_issue + e.t_done) / 2
            i = bisect_right(times, mid) - 1
            count = max(1, active[i] if i >= 0 else 1)
            load.by_count.setdefault(count, []).append(e.t_done - e.t_issue)
        load.sample_site = sites.most_common(1)[0][0] if sites else None
        out.append(load)
    return sorted(out, key=lambda h: (-len(h.ranks), h.host))
