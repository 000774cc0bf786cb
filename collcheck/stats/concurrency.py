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

from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from ..model import Run
from ..model.timing import Timings, first_seen, stable_order
from .sample import Sample, fmean, median

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
    # groups at once -> its durations µs (a list, or a sample.Sample: each fold's once, weighted)
    by_count: dict[int, list | Sample] = field(default_factory=dict)

    @property
    def cpus_text(self) -> str:
        return "? CPUs" if self.cpus is None else f"{self.cpus} CPU{'s' if self.cpus != 1 else ''}"

    def median_us(self, count: int) -> float | None:
        d = self.by_count.get(count)
        return median(d) if d else None

    def mean_us(self, count: int) -> float | None:
        d = self.by_count.get(count)
        return fmean(d) if d else None

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


def _busy_edges(group: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple:
    """Each group's busy time (the union of its collectives' intervals) as edges: (the instants,
    sorted, and how many groups are busy from each on). Intervals of a group sorted by their
    start; one joins the union's current piece while it starts by the piece's end, the running
    largest end of the group's intervals so far (a running maximum of keys that order by group, then end)."""
    if begin.dtype == object or end.dtype == object:
        return _busy_edges_exact(group, begin, end)
    by_start = np.argsort(begin, kind="stable")  # (each fold's starts ascend: runs timsort merges)
    order = by_start[stable_order(group[by_start])]
    g, a, b = group[order].astype(np.int64), begin[order], end[order]
    low, span = int(a.min()), int(b.max()) - int(a.min()) + 1
    if span * (int(g.max()) + 1) < 1 << 62:  # (a group's ends above all of the groups before it)
        base = g * span
        reach = np.maximum.accumulate(base + (b - low)) - base + low  # the group's largest end so far
    else:
        values, rank = np.unique(b, return_inverse=True)
        base = g * len(values)
        reach = values[np.maximum.accumulate(base + rank.reshape(-1)) - base]
    new = np.ones(len(g), dtype=bool)
    same = g[1:] == g[:-1]
    new[1:] = ~same | (a[1:] > reach[:-1])
    starts = np.flatnonzero(new)
    last = np.append(starts[1:], len(g)) - 1
    t = np.concatenate([a[starts], reach[last]])
    d = np.repeat(np.array([1, -1], dtype=np.int64), len(starts))
    order = np.argsort(t, kind="stable")  # (runs again; the count after the last edge at or before an
    # instant is what is read: equal instants in any order)
    return t[order], np.cumsum(d[order])


def _busy_edges_exact(group: np.ndarray, begin: np.ndarray, end: np.ndarray) -> tuple[list, list]:
    """_busy_edges for times beyond int64 (Python ints)."""
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
    """One entry per host, most ranks first. `timings`: model.Timings, each fold's ranks on a host
    counted once, weighted by their number."""
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
        cols = _host_columns(timings, set(ranks))
        if not len(cols["issue"]):
            out.append(load)
            continue
        _measure(load, run, timings, cols, api, list(apis))
        out.append(load)
    return sorted(out, key=lambda h: (-len(h.ranks), h.host))


def _host_columns(timings: Timings, ranks: set) -> dict[str, np.ndarray]:
    """The completed collectives (not P2P) of a host's ranks, a fold's once with its ranks there as
    weight (folds in the order of their first rank: a value's first one is where the ranks' is)."""
    parts = [(f.t, sum(r in ranks for r in f.ranks)) for f in timings.folds]
    parts = [(t, w, t.ok & ~timings.p2p[t.sig]) for t, w in parts if w]
    cols = {name: np.concatenate([getattr(t, name)[m] for t, _, m in parts] or [np.zeros(0, np.int64)])
            for name in ("issue", "done", "group", "sig", "nbytes", "site")}
    cols["weight"] = np.repeat([w for _, w, _ in parts], [int(m.sum()) for _, _, m in parts]).astype(np.int64)
    return cols


def _most(values: np.ndarray, weight: np.ndarray) -> int:
    """The index of the first of the values with the most weight (Counter.most_common's: of
    equal ones the first seen)."""
    seen, at = first_seen(values)
    j = int(np.argmax(np.bincount(at, weights=weight, minlength=len(seen))))
    return int(np.argmax(at == j))


def _measure(load: HostLoad, run: Run, timings: Timings, cols: dict, api: np.ndarray, names: list) -> None:
    """The host's groups, its most frequent kind of collective (op, bytes) and that kind's durations
    by the number of groups with a collective in flight at each one's midpoint."""
    issue, end, weight, nbytes = cols["issue"], cols["done"], cols["weight"], cols["nbytes"]
    load.groups = sorted(timings.groups[g] for g in np.flatnonzero(np.bincount(cols["group"])).tolist())
    times, active = _busy_edges(cols["group"], issue, np.maximum(end, issue + 1))
    kind = api[cols["sig"]]
    size_id = np.unique(nbytes, return_inverse=True)[1].reshape(-1)
    i = _most(kind * (int(size_id.max()) + 1) + size_id, weight)
    a, nb = int(kind[i]), nbytes[i].item() if isinstance(nbytes[i], np.generic) else nbytes[i]
    load.sample = (names[a], nb)
    sample = (kind == a) & (nbytes == nb)
    sites = cols["site"][sample]
    site = int(sites[_most(sites, weight[sample])])
    load.sample_site = run.sites[site] if site >= 0 else None
    mid = (issue[sample] + end[sample]) / 2
    i = np.searchsorted(np.array(times, dtype=issue.dtype), mid, side="right") - 1
    count = np.maximum(np.where(i >= 0, np.array(active)[np.maximum(i, 0)], 1), 1)
    counts, at = first_seen(count)
    took, w = end[sample] - issue[sample], weight[sample]
    for j, c in enumerate(counts.tolist()):
        load.by_count[c] = Sample(took[at == j], w[at == j])
