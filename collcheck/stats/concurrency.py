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
from collections import Counter
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from ..model import Run
from ..model.timing import Timings, first_seen

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


def _busy_edges(group: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[list, list]:
    """Each group's busy time (the union of its collectives' intervals) as edges: (the instants,
    sorted, and how many groups are busy from each on)."""
    edges: list[tuple] = []
    current = hi = lo = None
    order = np.lexsort((end, begin, group))
    for g, a, b in zip(group[order].tolist(), begin[order].tolist(), end[order].tolist()):
        if g == current and a <= hi:
            hi = max(hi, b)
            continue
        if current is not None:
            edges += ((lo, 1), (hi, -1))
        current, lo, hi = g, a, b
    if current is not None:
        edges += ((lo, 1), (hi, -1))
    edges.sort()
    return [t for t, _ in edges], list(accumulate(d for _, d in edges))


def host_load(run: Run, timings: Timings) -> list[HostLoad]:
    """One entry per host, most ranks first. `timings`: model.Timings."""
    hosts: dict[str, list[int]] = {}
    for rank, log in run.ranks.items():
        hosts.setdefault(str(log.header.get("host", "?")), []).append(rank)
    apis: dict[str, int] = {}
    api = np.array([apis.setdefault(k[0], len(apis)) for k in timings.kinds], dtype=np.int64)[timings.kind]
    out = []
    for host, ranks in hosts.items():
        headers = [run.ranks[r].header for r in ranks]
        cpus = [h["cpus"] for h in headers if isinstance(h.get("cpus"), int)]
        threads = [h["threads"] for h in headers if isinstance(h.get("threads"), int)]
        load = HostLoad(host, sorted(ranks), min(cpus) if cpus else None, max(threads) if threads else None)
        done = [t.ok & ~timings.p2p[t.sig] for t in (timings[r] for r in ranks)]
        cols = {name: np.concatenate([getattr(timings[r], name)[m] for r, m in zip(ranks, done)])
                for name in ("issue", "done", "group", "sig", "nbytes", "site")}
        if not len(cols["issue"]):
            out.append(load)
            continue
        issue, end = cols["issue"], cols["done"]
        load.groups = sorted(timings.groups[g] for g in np.unique(cols["group"]).tolist())
        times, active = _busy_edges(cols["group"], issue, np.maximum(end, issue + 1))
        kind = api[cols["sig"]]
        kinds = Counter(zip(kind.tolist(), cols["nbytes"].tolist()))
        (a, nbytes), _ = kinds.most_common(1)[0]
        load.sample = (list(apis)[a], nbytes)
        sample = (kind == a) & (cols["nbytes"] == nbytes)
        site = Counter(cols["site"][sample].tolist()).most_common(1)[0][0]
        load.sample_site = run.sites[site] if site >= 0 else None
        mid = (issue[sample] + end[sample]) / 2
        i = np.searchsorted(np.array(times, dtype=issue.dtype), mid, side="right") - 1
        count = np.maximum(np.where(i >= 0, np.array(active)[np.maximum(i, 0)], 1), 1)
        counts, at = first_seen(count)
        took = (end[sample] - issue[sample])[np.argsort(at, kind="stable")].tolist()
        k = 0
        for c, n in zip(counts.tolist(), np.bincount(at, minlength=len(counts)).tolist()):
            load.by_count[c] = took[k:k + n]
            k += n
        out.append(load)
    return sorted(out, key=lambda h: (-len(h.ranks), h.host))
