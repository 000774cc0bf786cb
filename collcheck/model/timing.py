"""Every rank's collectives as columns of what the statistics read of each (issue and completion
times, call site, bytes, group), numpy arrays rather than an object per event: a run of 100,000
groups is as many collectives per rank, and decoding each one's record again took longer than
all of the statistics. Taken from the times the scan kept (load_run(times=True); a rank read by
kinds: its kind's log's, as its events are decoded from that log); a log read without them (a
format 1 log, a damaged one, a run loaded for something else) from its decoded events, which are
kept for what reads them next (the Perfetto export).

Times are int64 while they and their differences are exact in it and in float64 (under EXACT);
a log whose times lie beyond gets Python ints (numpy's object arrays: the same results as
Python's arithmetic, slower).

Ranks of one kind (model/load.py: one log read, the others sharing its columns) with the same
collectives pending and raised have equal columns: they are one `Fold`, whose columns the
statistics count once, weighted by its ranks (`Timings.folds`).
"""

from __future__ import annotations

import copy
from array import array
from dataclasses import dataclass

import numpy as np

from ..logfile.ops import P2P_OPS
from .run import RankLog, Run, tensor_bytes

EXACT = 1 << 52  # µs: times (and halves of their sums) exact in int64 and float64 below this
_INT64 = 1 << 62  # values kept in int64 below this (sums of two of them still fit)


@dataclass
class Timing:
    """One rank's collectives, in its log's order (index i: its event i, as `RankLog.event(i)`)."""

    rank: int
    issue: np.ndarray  # µs, wall clock (Event.t_issue)
    done: np.ndarray  # µs (Event.t_done) where `has_done`, else 0
    has_done: np.ndarray  # bool: t_done is not None
    ok: np.ndarray  # bool: completed (t_done known, no error)
    site: np.ndarray  # run.sites id, -1: none
    nbytes: np.ndarray  # its tensors' bytes as issued (Event.sized.nbytes)
    sync: np.ndarray  # bool: neither async_op nor native
    sig: np.ndarray  # run.signatures id
    group: np.ndarray  # its group's index in Timings.groups
    events: list | None = None  # its decoded events, where they were decoded for this
    key: tuple | None = None  # equal for ranks with equal columns (Timings.folds); None: decoded

    def __len__(self) -> int:
        return len(self.sig)


@dataclass
class Fold:
    """Ranks whose columns are equal (`t`, the first rank's), counted once."""

    ranks: list[int]  # ascending
    t: Timing

    @property
    def weight(self) -> int:
        return len(self.ranks)


class Timings(dict):
    """rank -> Timing, in rank order, and the run-wide tables their ids index; `folds`: the ranks
    with equal columns together (`fold=False`: each rank alone, what the folds must add up to)."""

    def __init__(self, run: Run, fold: bool = True):
        super().__init__()
        self.run = run
        self.groups = run.group_names()
        self._group_at = {name: k for k, name in enumerate(self.groups)}
        sigs = run.signatures
        at: dict[tuple, int] = {}  # (api, op, role): what a call site's collectives share besides their group
        self.kind = np.array([at.setdefault((s.api, s.op, s.role), len(at)) for s in sigs] or [0], dtype=np.int64)
        self.kinds: list[tuple] = list(at) or [(None, None, None)]
        self.p2p = np.array([s.op in P2P_OPS for s in sigs] or [False])  # signature id -> a P2P op
        self.sig_bytes = ints([s.nbytes for s in sigs] or [0])
        self._keys = None
        self._shared: dict[int, tuple] = {}  # id of a log read in full -> its columns (timings' own)
        self._own: dict[tuple, Timing] = {}  # (that id, pending, errors) -> the first such rank's Timing
        by_key: dict[object, Fold] = {}
        for rank, log in sorted(run.ranks.items()):
            t = self._from_times(log)
            key = rank if t is None or not fold else t.key
            self[rank] = t = t or self._from_events(log)
            if key in by_key:
                by_key[key].ranks.append(rank)
            else:
                by_key[key] = Fold([rank], t)
        self.folds: list[Fold] = list(by_key.values())  # in the order of their first rank
        self.fold_of = {r: k for k, f in enumerate(self.folds) for r in f.ranks}  # rank -> its fold's index

    def site_keys(self) -> tuple[list[np.ndarray], list[tuple]]:
        """What the statistics count per call site: per fold (`folds`), each event's key id, and
        the keys (site, api, op, group, role) in the order of their first event (ranks in order)."""
        if self._keys is None:
            self._keys = _site_keys(self)
        return self._keys

    def _slots(self, log: RankLog) -> np.ndarray:
        """Each event's group index, from its group slot."""
        slot = np.array([self._group_at[g.name] for g in log.groups] or [0], dtype=np.int64)
        return slot[column(log.gid)]

    def _from_times(self, log: RankLog) -> Timing | None:
        """From the scan's columns (scan.Times) of the log its events are decoded from (a rank read
        by kinds: its kind's, as RankLog.event decodes them), with its own completions and errors;
        None where they are not kept or may differ from what decoding gives (damage, lost
        records, a capped log, format 1)."""
        src = log.like or log
        t = src.times
        if (t is None or t.wide or len(t.issued) != len(log) or src.damage or src.lost or src.dropped
                or src.header.get("v", 1) < 2):
            return None
        shared = self._shared.get(id(src))
        if shared is None:  # (ranks of a kind share the columns: made once)
            sig = column(src.sig)
            nbytes = self.sig_bytes[sig]
            if t.tensors:
                sizes = [tensor_bytes(ts) if ts is not None else self.run.signatures[sig[i]].nbytes
                         for i, ts in t.tensors.items()]
                nbytes = _set(nbytes, list(t.tensors), sizes)
            site = np.array(src.time_sites + [-1], dtype=np.int64)[column(t.site)]
            shared = self._shared[id(src)] = (
                microseconds(t.issued, src.base_us), microseconds(t.done, src.base_us), column(t.timed) != 0, site,
                nbytes, column(t.flags) == 0, sig, self._slots(src))
        key = (id(src), frozenset(log.pending), frozenset(log.errors))
        same = self._own.get(key)
        if same is not None:  # (a rank of a fold: its columns are the first one's)
            t = copy.copy(same)
            t.rank = log.rank
            return t
        issue, done, timed, site, nbytes, sync, sig, group = shared
        has_done = timed & ~_mask(len(log), log.pending)
        t = self._own[key] = Timing(log.rank, issue, done, has_done, has_done & ~_mask(len(log), log.errors), site,
                                    nbytes, sync, sig, group, key=key)
        return t

    def _from_events(self, log: RankLog) -> Timing:
        evs = log.events()
        site_id = self.run.site_id
        return Timing(
            log.rank, ints([e.t_issue for e in evs], EXACT),
            ints([0 if e.t_done is None else e.t_done for e in evs], EXACT),
            np.array([e.t_done is not None for e in evs], dtype=bool), np.array([e.completed for e in evs], dtype=bool),
            np.array([-1 if e.site is None else site_id(e.site) for e in evs], dtype=np.int64),
            ints([e.sized.nbytes for e in evs]), np.array([not (e.async_op or e.native) for e in evs], dtype=bool),
            column(log.sig), self._slots(log), evs)


def column(values) -> np.ndarray:
    """An array.array, bytearray or range as an int64 numpy array (a bool one for bytearrays is
    the caller's: `!= 0`)."""
    if isinstance(values, range):
        return np.arange(values.start, values.stop, values.step, dtype=np.int64)
    if not len(values):
        return np.zeros(0, np.int64)
    if isinstance(values, (bytes, bytearray)):
        return np.frombuffer(values, np.uint8).astype(np.int64)
    kind = "i" if values.typecode in "bhilq" else "u"
    return np.frombuffer(values, f"{kind}{values.itemsize}").astype(np.int64)


def microseconds(col: array, base: int) -> np.ndarray:
    """A column of µs since the log's origin as wall-clock µs."""
    a = column(col)
    if len(a) and not (-EXACT < base + int(a.min()) and base + int(a.max()) < EXACT):
        return np.array([base + x for x in col], dtype=object)
    return a + base


def ints(values: list, bound: int = _INT64) -> np.ndarray:
    """Python ints as int64, or as themselves (object) where one is at `bound` or beyond."""
    if values and not (-bound < min(values) and max(values) < bound):
        return np.array(values, dtype=object)
    return np.array(values, dtype=np.int64)


def _set(a: np.ndarray, at: list[int], values: list[int]) -> np.ndarray:
    """A copy of `a` with `values` at `at` (object where one does not fit int64)."""
    out = a.astype(object) if a.dtype != object and not -_INT64 < min(values) <= max(values) < _INT64 else a.copy()
    out[at] = values
    return out


def _mask(n: int, indices) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    if indices:
        m[np.fromiter(indices, np.int64, len(indices))] = True
    return m


def stable_order(ids: np.ndarray) -> np.ndarray:
    """np.argsort(ids, kind="stable"); ids of 0..65535 as uint16, which numpy sorts by radix (O(n))."""
    if len(ids) and ids.dtype.kind in "iu" and int(ids.min()) >= 0 and int(ids.max()) < 1 << 16:
        ids = ids.astype(np.uint16)
    return np.argsort(ids, kind="stable")


def first_seen(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct values in the order of their first occurrence, each value's position in it).
    Small non-negative ints (ids) by a table as long as their range, others by sorting."""
    n = len(values)
    if n and values.dtype.kind in "iu":
        lo, hi = int(values.min()), int(values.max())
        if lo >= 0 and hi < max(2 * n, 1 << 16):
            first = np.full(hi + 1, n, dtype=np.int64)
            np.minimum.at(first, values, np.arange(n))
            present = np.flatnonzero(first < n)
            uniq = present[np.argsort(first[present], kind="stable")]
            position = np.empty(hi + 1, dtype=np.int64)
            position[uniq] = np.arange(len(uniq))
            return uniq.astype(values.dtype), position[values]
    uniq, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    return uniq[order], position[inverse.reshape(-1)]


def _site_keys(timings: Timings) -> tuple[list[np.ndarray], list[tuple]]:
    """(A fold's first event with a key comes first among the ranks' too: the ranks of an earlier
    fold without it are lower, and none of a later one is.)"""
    n_sites, n_kinds, n_groups = len(timings.run.sites) + 1, len(timings.kinds), max(len(timings.groups), 1)
    wide = n_sites * n_kinds * n_groups >= 1 << 63  # (no real run has ids that many: Python ints then)
    cols = [f.t for f in timings.folds]
    parts = [(((t.site.astype(object) if wide else t.site) + 1) * n_kinds + timings.kind[t.sig]) * n_groups + t.group
             for t in cols]
    uniq, ids = first_seen(np.concatenate(parts) if parts else np.zeros(0, np.int64))
    sites, groups, kinds = timings.run.sites, timings.groups, timings.kinds
    keys = []
    for key in uniq.tolist():
        rest, g = divmod(key, n_groups)
        s, k = divmod(rest, n_kinds)
        api, op, role = kinds[k]
        keys.append((sites[s - 1] if s else None, api, op, groups[g], role))
    bounds = np.cumsum([0] + [len(t) for t in cols])
    return [ids[bounds[k]:bounds[k + 1]] for k in range(len(cols))], keys


def summable(a: np.ndarray) -> np.ndarray:
    """`a`, as Python ints (object) where its sum could leave int64."""
    if a.dtype != object and len(a) and max(abs(int(a.max())), abs(int(a.min()))) * len(a) >= 1 << 63:
        return a.astype(object)
    return a
