"""Per call site x op x group: how often, how many bytes, how long from issue to completion, and
the bandwidth that makes; per group: members, collectives, bytes.

Bus bandwidth follows nccl-tests' definitions (the bytes each rank's link carries, comparable
across ops and world sizes): algorithmic bandwidth = bytes / time, times 2(n-1)/n for an
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for the rooted ops and P2P.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..model import Run

# wire op -> bus bandwidth factor for a group of n ranks
_BUS = {"allreduce_": lambda n: 2 * (n - 1) / n, "allreduce_coalesced_": lambda n: 2 * (n - 1) / n,
        "allgather_": lambda n: (n - 1) / n, "_allgather_base_": lambda n: (n - 1) / n,
        "allgather_coalesced_": lambda n: (n - 1) / n, "allgather_into_tensor_coalesced_": lambda n: (n - 1) / n,
        "reduce_scatter_": lambda n: (n - 1) / n, "_reduce_scatter_base_": lambda n: (n - 1) / n,
        "reduce_scatter_tensor_coalesced_": lambda n: (n - 1) / n, "alltoall_": lambda n: (n - 1) / n,
        "alltoall_base_": lambda n: (n - 1) / n}


@dataclass
class SiteStats:
    """One call site's collectives of one op on one group, over every rank that issued them."""

    site: tuple | None  # (file, line, function)
    api: str
    op: str  # wire op
    group: str
    role: str | None  # what the call is for, when torch issued it ("gradient bucket", ...)
    ranks: list[int] = field(default_factory=list)
    calls: int = 0  # per rank (the most any rank issued)
    bytes_per_call: int = 0  # median over calls
    durations_us: list = field(default_factory=list)  # issue to completion, every completed call of every rank
    per_rank_us: dict = field(default_factory=dict)  # rank -> its calls' total time

    @property
    def total_s(self) -> float:
        """Time inside these collectives, on the rank that spent the most."""
        return max(self.per_rank_us.values(), default=0) / 1e6

    def percentile_us(self, q: float) -> float | None:
        d = sorted(self.durations_us)
        return d[min(len(d) - 1, int(q * len(d)))] if d else None

    @property
    def median_us(self) -> float | None:
        return statistics.median(self.durations_us) if self.durations_us else None

    def bandwidth_mbs(self, group_size: int) -> tuple[float | None, float | None]:
        """(algorithmic, bus) bandwidth in MB/s at the median duration."""
        t = self.median_us
        if not t or not self.bytes_per_call:
            return None, None
        alg = self.bytes_per_call / t  # bytes per µs = MB/s
        return alg, alg * _BUS.get(self.op, lambda n: 1.0)(max(group_size, 1))


@dataclass
class GroupStats:
    name: str
    members: tuple
    calls: int = 0  # per rank (the most any member issued)
    bytes: int = 0  # per rank (the most any member issued)


def rank_events(run: Run) -> dict[int, list]:
    """Every rank's events, materialised once for all of the statistics (each is read several times)."""
    return {rank: log.events() for rank, log in sorted(run.ranks.items())}


def site_stats(run: Run, events: dict[int, list]) -> tuple[list[SiteStats], dict[str, GroupStats]]:
    """Every call site's statistics, most time first, and every group's. `events`: rank_events."""
    sites: dict[tuple, SiteStats] = {}
    calls: dict[tuple, dict[int, int]] = {}
    sizes: dict[tuple, list[int]] = {}
    group_calls: dict[str, dict[int, list[int]]] = {}
    for rank, evs in events.items():
        for e in evs:
            key = (e.site, e.sig.api, e.sig.op, e.group, e.sig.role)
            s = sites.get(key)
            if s is None:
                s = sites[key] = SiteStats(e.site, e.sig.api, e.sig.op, e.group, key[4])
            nbytes = e.sized.nbytes
            calls.setdefault(key, {}).setdefault(rank, 0)
            calls[key][rank] += 1
            sizes.setdefault(key, []).append(nbytes)
            if e.t_done is not None and e.error is None:
                d = max(0, e.t_done - e.t_issue)
                s.durations_us.append(d)
                s.per_rank_us[rank] = s.per_rank_us.get(rank, 0) + d
            g = group_calls.setdefault(e.group, {}).setdefault(rank, [0, 0])
            g[0] += 1
            g[1] += nbytes
    for key, s in sites.items():
        s.ranks = sorted(calls[key])
        s.calls = max(calls[key].values())
        v = sizes[key]
        s.bytes_per_call = v[0] if len(v) == 1 else int(statistics.median(v))
    groups = {name: GroupStats(name, run.group_members(name), max(c for c, _ in per.values()),
                               max(b for _, b in per.values())) for name, per in group_calls.items()}
    return sorted(sites.values(), key=lambda s: (-s.total_s, -s.calls)), groups
