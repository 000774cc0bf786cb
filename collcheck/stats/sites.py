"""Per call site x op x group: how often, how many bytes, how long from issue to completion, and
the bandwidth that makes; per group: members, collectives, bytes.

Bus bandwidth follows nccl-tests' definitions (the bytes each rank's link carries, comparable
across ops and world sizes): algorithmic bandwidth = bytes / time, times 2(n-1)/n for an
all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for the rooted ops and P2P.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model import Run
from ..model.timing import Timings, first_seen, stable_order, summable
from .sample import Sample, median, percentile, sorted_by_key

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
    # issue to completion, every completed call of every rank (a list, or a sample.Sample)
    durations_us: list | Sample = field(default_factory=list)
    per_rank_us: dict = field(default_factory=dict)  # rank -> its calls' total time

    @property
    def total_s(self) -> float:
        """Time inside these collectives, on the rank that spent the most."""
        return max(self.per_rank_us.values(), default=0) / 1e6

    def percentile_us(self, q: float) -> float | None:
        return percentile(self.durations_us, q)

    @property
    def median_us(self) -> float | None:
        return median(self.durations_us) if self.durations_us else None

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


def rank_events(run: Run, timings: Timings | None = None) -> dict[int, list]:
    """Every rank's decoded events (those `timings` decoded already are not decoded again)."""
    return {rank: (timings[rank].events if timings is not None and timings[rank].events is not None else log.events())
            for rank, log in sorted(run.ranks.items())}


def by_key(key: np.ndarray, rank: np.ndarray) -> tuple:
    """Events grouped by key (ids 0..k-1, each used), then rank: (the events' order, the start of
    each (key, rank) run in it, each run's key and rank, the index of each key's first run)."""
    order = stable_order(key)  # (within a key: rank by rank, each in its log's order)
    k, r = key[order], rank[order]
    change = np.ones(len(order), dtype=bool)
    change[1:] = (k[1:] != k[:-1]) | (r[1:] != r[:-1])
    runs = np.flatnonzero(change)
    run_key = k[runs]
    first = np.ones(len(runs), dtype=bool)
    first[1:] = run_key[1:] != run_key[:-1]
    return order, runs, run_key, r[runs], np.flatnonzero(first)


def site_stats(run: Run, timings: Timings) -> tuple[list[SiteStats], dict[str, GroupStats]]:
    """Every call site's statistics, most time first, and every group's. `timings`: model.Timings;
    counted by key and fold of ranks all at once (numpy), each fold once with its ranks as weight,
    then an object per call site and group."""
    ids, keys = timings.site_keys()
    folds = timings.folds
    if not keys:
        return [], {}
    key = np.concatenate(ids)
    fold = np.concatenate([np.full(len(f.t), k, dtype=np.int64) for k, f in enumerate(folds)])
    weight = np.array([f.weight for f in folds], dtype=np.int64)
    nbytes = np.concatenate([f.t.nbytes for f in folds])
    ok = np.concatenate([f.t.ok for f in folds])
    took = summable(np.maximum(np.concatenate([f.t.done - f.t.issue for f in folds]), 0))
    order, runs, run_key, run_fold, first_run = by_key(key, fold)
    calls = np.maximum.reduceat(np.diff(np.append(runs, len(order))), first_run).tolist()
    ranks = [sorted(r for k in fs for r in folds[k].ranks) for fs in _split(run_fold.tolist(), first_run)]
    per_call = _median_bytes(key, nbytes, weight[fold], len(keys))
    # durations of the completed calls, and their total per rank
    done = ok[order]
    bounds = np.searchsorted(key[order][done], np.arange(len(keys) + 1))
    took_done, weight_done = took[order][done], weight[fold[order][done]]
    durations = [Sample(took_done[a:b], weight_done[a:b]) for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]
    totals = np.add.reduceat(np.where(done, took[order], 0), runs).tolist()
    timed = np.logical_or.reduceat(done, runs).tolist()
    per_fold: list[list] = [[] for _ in keys]
    for k, f, total, any_done in zip(run_key.tolist(), run_fold.tolist(), totals, timed):
        if any_done:
            per_fold[k] += [(r, total) for r in folds[f].ranks]
    per_rank = [dict(sorted(p)) for p in per_fold]
    sites = [SiteStats(site, api, op, group, role, ranks[k], calls[k], per_call[k], durations[k], per_rank[k])
             for k, (site, api, op, group, role) in enumerate(keys)]
    # most time first, then most calls (SiteStats.total_s: the rank that spent the most), a stable sort
    spent = np.array([max(d.values(), default=0) / 1e6 for d in per_rank], dtype=float)
    order = np.lexsort((-np.array(calls, dtype=float), -spent)).tolist()
    return [sites[k] for k in order], _group_stats(run, timings, fold, nbytes)


def _median_bytes(key: np.ndarray, nbytes: np.ndarray, weight: np.ndarray, n_keys: int) -> list[int]:
    """Per key, the median of its calls' bytes over every rank (each value `weight` times; from the
    middle two as statistics.median takes them, made an int)."""
    sizes, ends = sorted_by_key(key, nbytes, weight)
    counts = np.bincount(key, weights=weight, minlength=n_keys).astype(np.int64)
    start = np.cumsum(counts) - counts
    at = np.searchsorted(ends, np.concatenate([start + (counts - 1) // 2, start + counts // 2]), side="right")
    lo, hi = sizes[at[:n_keys]].tolist(), sizes[at[n_keys:]].tolist()
    return [a if n % 2 else int((a + b) / 2) for a, b, n in zip(lo, hi, counts.tolist())]


def _group_stats(run: Run, timings: Timings, fold: np.ndarray, nbytes: np.ndarray) -> dict[str, GroupStats]:
    """Per group (in the order of its first collective): members, and the most collectives and
    bytes a member issued on it."""
    seen, group = first_seen(np.concatenate([f.t.group for f in timings.folds]))
    order, runs, _, _, first_run = by_key(group, fold)
    calls = np.maximum.reduceat(np.diff(np.append(runs, len(order))), first_run).tolist()
    sent = np.maximum.reduceat(np.add.reduceat(summable(nbytes)[order], runs), first_run).tolist()
    names, members = [timings.groups[g] for g in seen.tolist()], run.group_index.members
    return {name: GroupStats(name, members(name), c, b) for name, c, b in zip(names, calls, sent)}


def _split(values: list, starts) -> list[list]:
    """`values` cut at `starts` (the first at 0)."""
    bounds = [*np.asarray(starts).tolist()[1:], len(values)]
    return [values[a:b] for a, b in zip([0, *bounds[:-1]], bounds)]
