"""What to change, with the numbers that say so, most time to gain first.

- `fuse`: one call site issues its collectives back to back in a loop (a collective per parameter,
  per buffer): each pays the collective's fixed cost. The gain is estimated from this run's own
  calls, a fixed cost plus bytes over bandwidth fitted to every completed collective of the op:
  one call per loop of all its bytes against what the loop took.
- `straggler`: one rank issued most collectives last, far more often than chance among its
  group's members would have it, and its longer work before them explains the others' waiting
  (skew.py).
- `batch`: a call site issues many small collectives one at a time (an iteration each) and each
  takes far longer than moving its bytes would at FLOOR_MBS: its time is the collective's fixed
  cost (on gloo a small collective is a chain of messages and thread wake-ups between the ranks),
  so the number of calls drives it; batching several iterations' tensors into one call divides it.
- `overlap`: a call site's collectives are synchronous (no async_op) and each is followed by
  compute before the rank's next collective: issued with async_op=True and waited for where the
  result is first read, the smaller of the two could run hidden behind the other (an upper bound:
  the log cannot tell whether that compute reads the result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ..knowledge import sites
from ..model import P2P_OPS, Run, rank_ranges
from ..model.timing import EXACT, Timings, ints, stable_order, summable
from .sample import Sample, fmean, median, weighted
from .sites import SiteStats, by_key
from .skew import Skew

MIN_LOOP = 3  # collectives back to back from one site that make a loop worth fusing
MIN_SHARE = 0.75  # a straggler issued at least this share of collectives last (else: noise)
MAX_CHANCE = 1e-3  # ... and that many lasts would happen by chance with at most this probability
MIN_EXPLAINED = 0.1  # ... and its longer work explains at least this share of the waiting there ...
MIN_STRAGGLER_SHARE = 0.1  # ... which is at least this share of the busiest rank's time inside collectives
MIN_BATCH_CALLS = 50  # batch: at least this many calls per rank ...
LATENCY_SHARE = 0.75  # ... each spending at least this share of its time beyond moving its bytes ...
FLOOR_MBS = 100.0  # ... at this rate (MB/s; any link and loopback does better: the estimate errs high)
BATCH = 8  # calls per batch in the estimate
CONTENDED = 1.5  # a kind of collective this much slower with more groups at once (groups.py's contention)
MIN_HIDDEN_SHARE = 0.2  # overlap: at least this share of a site's time could be hidden ...
MIN_HIDDEN_S = 1e-3  # ... and at least this much


@dataclass
class Hint:
    kind: str
    site: tuple | None
    gain_s: float  # estimated time saved (fuse) or waiting caused (straggler)
    text: str
    evidence: dict = field(default_factory=dict)


def where_text(site: tuple | None) -> str:
    return sites.path_line(site)


def _loops(run: Run, candidates: list[SiteStats], timings: Timings) -> dict[int, Sample]:
    """How many collectives one pass of the loop issues, for each run of a call site's collectives
    issued back to back (rank by rank, in its group's order): the run's shortest period of sizes
    (a per-parameter loop repeats its parameters' sizes every step); runs of at least two. Per
    candidate (by its index), from every fold's events (model.Timings.folds, once for its ranks)
    cut once into runs of one group, site, API and role."""
    site_ids = {site: k for k, site in enumerate(run.sites)}
    codes: dict[tuple, int] = {}  # (api, role) -> its code
    code = np.array([codes.setdefault((s.api, s.role), len(codes)) for s in run.signatures] or [0], dtype=np.int64)
    group_at = {name: k for k, name in enumerate(timings.groups)}
    keys = [(group_at.get(s.group, -1), site_ids.get(s.site, -2) if s.site is not None else -1,
             codes.get((s.api, s.role), -1)) for s in candidates]
    wanted = set(keys)
    periods: dict[tuple, list[int]] = {}  # (fold, group, site, code) -> periods
    for f, fold in enumerate(timings.folds):
        t = fold.t
        order = stable_order(t.group)  # each group's events in the log's order
        g, site, c = t.group[order], t.site[order], code[t.sig[order]]
        change = np.ones(len(order), dtype=bool)
        change[1:] = (g[1:] != g[:-1]) | (site[1:] != site[:-1]) | (c[1:] != c[:-1])
        starts = np.flatnonzero(change)
        ends = np.append(starts[1:], len(order))
        long = ends - starts >= 2  # (runs of one collective have no period)
        starts, ends = starts[long], ends[long].tolist()
        nbytes = t.nbytes[order]
        for a, b, key in zip(starts.tolist(), ends, zip(g[starts].tolist(), site[starts].tolist(), c[starts].tolist())):
            if key in wanted:
                periods.setdefault((f, *key), []).append(_period(nbytes[a:b].tolist()))
    out = {}
    for k, s in enumerate(candidates):
        weight: dict[int, int] = {}
        for r in s.ranks:
            f = timings.fold_of[r]
            weight[f] = weight.get(f, 0) + 1
        found = [(periods.get((f, *keys[k]), []), w) for f, w in weight.items()]
        out[k] = weighted([(np.array(p, dtype=np.int64), w) for p, w in found if p])
    return out


def _period(seq: list) -> int:
    n = len(seq)
    return next((p for p in range(1, n // 2 + 1) if n % p == 0 and seq[p:] == seq[:-p]), n)


def _cost_model(timings: Timings, op: str) -> tuple[float, float] | None:
    """(fixed µs, µs per byte) fitted by least squares to every completed collective of `op`, the
    per-byte cost at most that of FLOOR_MBS. Each fold's terms made once; the sums add them rank by
    rank, in Python's order (sum over a chain of the folds' lists)."""
    of_op = np.array([s.op == op for s in timings.run.signatures] or [False])
    points = []  # per fold: (bytes, µs) of its completed collectives of op, and its ranks
    for f in timings.folds:
        t = f.t
        m = t.ok & of_op[t.sig]
        points.append((t.nbytes[m].tolist(), (t.done - t.issue)[m].tolist(), len(f.ranks)))
    if sum(len(xs) * w for xs, _, w in points) < 3:
        return None
    xs = weighted([(np.array(x, dtype=object), w) for x, _, w in points])
    ys = weighted([(np.array(y, dtype=object), w) for _, y, w in points])
    mx, my = fmean(xs), fmean(ys)
    order = [timings.fold_of[r] for r in timings]  # (rank by rank)
    squares = [[(x - mx) ** 2 for x in x_] for x_, _, _ in points]
    var = sum(chain.from_iterable(squares[f] for f in order))
    products = [[(x - mx) * (y - my) for x, y in zip(x_, y_)] for x_, y_, _ in points]
    slope = max(0.0, sum(chain.from_iterable(products[f] for f in order)) / var) if var else 0.0
    # a slope steeper than FLOOR_MBS is waiting that happened to fall on the bigger calls, not bytes
    slope = min(slope, 1 / FLOOR_MBS)
    rests = weighted([(np.array([y - slope * x for x, y in zip(x_, y_)], dtype=object), w) for x_, y_, w in points])
    fixed = max(0.0, median(rests))  # robust to a few slow calls
    return fixed, slope


def fuse_hints(run: Run, sites: list[SiteStats], timings: Timings) -> list[Hint]:
    out, models = [], {}
    candidates = [s for s in sites if s.op not in P2P_OPS and s.calls >= MIN_LOOP and s.durations_us]
    found = _loops(run, candidates, timings) if candidates else {}
    for k, s in enumerate(candidates):
        loops = found[k]
        if not loops or median(loops) < MIN_LOOP:
            continue
        if s.op not in models:  # (one fit per op, whatever the number of sites)
            models[s.op] = _cost_model(timings, s.op)
        model = models[s.op]
        if model is None:
            continue
        fixed, per_byte = model
        per_loop = median(loops)
        n_loops = s.calls / per_loop
        fused_s = n_loops * (fixed + per_byte * s.bytes_per_call * per_loop) / 1e6
        gain = s.total_s - fused_s
        if gain <= 0:
            continue
        where = where_text(s.site)
        text = (f"{where}: {s.api} issued {per_loop:g} times in a loop ({s.calls} calls per rank, median "
                f"{s.bytes_per_call} bytes): {s.total_s:.4f} s inside them; one {s.api} of each loop's tensors "
                f"flattened together (or bucketed) would take about {fused_s:.4f} s here (fixed cost "
                f"{fixed:.0f} µs per call in this run): about {gain:.4f} s less")
        out.append(Hint("fuse", s.site, gain, text, {
            "calls_per_rank": s.calls, "per_loop": per_loop, "bytes_per_call": s.bytes_per_call,
            "total_s": round(s.total_s, 6), "fused_s": round(fused_s, 6), "fixed_us": round(fixed, 1),
            "us_per_byte": per_byte}))
    return out


def chance_of_lasts(last_in: int, slots: int, p: float) -> float:
    """Probability that a rank comes last to at least `last_in` of `slots` collectives when it is last
    to each with probability `p` (1/members: nobody straggles), the binomial tail: of two ranks each
    is last half the time, so 9 of 12 happens by chance (7 %); 27 of 30 among four ranks does not."""
    return sum(math.comb(slots, k) * p ** k * (1 - p) ** (slots - k) for k in range(last_in, slots + 1))


def straggler_hints(skew: Skew, sites: list[SiteStats]) -> list[Hint]:
    if not skew.stragglers or not skew.slots:
        return []
    top = skew.stragglers[0]
    total = sum(s.wait_caused_us for s in skew.stragglers)
    if not top.slots or top.last_in / top.slots < MIN_SHARE or total <= 0:
        return []
    if chance_of_lasts(top.last_in, top.slots, top.expected_last / top.slots) > MAX_CHANCE:
        return []
    waited = sum(x[3] for x in skew.slots if x[2] == top.rank)
    if top.wait_caused_us < MIN_EXPLAINED * waited:  # last because its previous collectives completed later
        return []
    inside: dict[int, float] = {}
    for s in sites:
        for r, us in s.per_rank_us.items():
            inside[r] = inside.get(r, 0.0) + us
    if top.wait_caused_us < MIN_STRAGGLER_SHARE * max(inside.values(), default=0.0):
        return []  # real, but too little to matter
    worst = max((x for x in skew.slots if x[2] == top.rank), key=lambda x: x[3], default=None)
    site = worst[4] if worst is not None else None  # where it kept the others waiting longest
    text = (f"rank {top.rank} issued {top.last_in} of its {top.slots} collectives last "
            f"({100 * top.last_in / top.slots:.0f} %): the others waited {top.wait_caused_us / 1e6:.4f} s for it "
            f"({100 * top.wait_caused_us / total:.0f} % of all waiting; ranks {rank_ranges([s.rank for s in skew.stragglers])}); "
            "look at what it does before them (data loading, uneven work, a slower device or host)")
    return [Hint("straggler", site, top.wait_caused_us / 1e6, text,
                 {"rank": top.rank, "last_in": top.last_in, "slots": top.slots,
                  "wait_caused_s": round(top.wait_caused_us / 1e6, 6)})]


def batch_hints(sites: list[SiteStats], skip: set, hosts: list) -> list[Hint]:
    """`skip`: sites a fuse hint already covers; `hosts`: concurrency.host_load, for what the number of
    groups communicating at once does to these calls."""
    out = []
    for s in sites:
        if s.op in P2P_OPS or s.calls < MIN_BATCH_CALLS or s.site in skip or not s.median_us:
            continue
        move_us = s.bytes_per_call / FLOOR_MBS  # bytes / (MB/s) = µs
        if move_us > (1 - LATENCY_SHARE) * s.median_us:
            continue
        mean_us = 1e6 * s.total_s / s.calls  # (the mean: a few slow calls weigh on the total as they will batched)
        batched_s = s.calls / BATCH * (mean_us + (BATCH - 1) * move_us) / 1e6
        gain = s.total_s - batched_s
        if gain < MIN_HIDDEN_S:
            continue
        where = where_text(s.site)
        text = (f"{where}: {s.api} issued {s.calls} times per rank, {s.bytes_per_call} bytes each, {s.total_s:.4f} s "
                f"inside them: each took {s.median_us:.0f} µs (median) where moving its bytes takes at most "
                f"{move_us:.0f} µs (at {FLOOR_MBS:.0f} MB/s): the time is the collective's fixed cost, paid per "
                f"call, so the number of calls drives it{_groups_effect(s, hosts)}. If several iterations do not "
                f"need each other's result, one {s.api} of {BATCH} iterations' tensors stacked would take about "
                f"{batched_s:.4f} s in all: about {gain:.4f} s less")
        out.append(Hint("batch", s.site, gain, text, {
            "calls_per_rank": s.calls, "bytes_per_call": s.bytes_per_call, "median_us": s.median_us,
            "move_us": round(move_us, 3), "total_s": round(s.total_s, 6), "batched_s": round(batched_s, 6)}))
    return out


def _groups_effect(s: SiteStats, hosts: list) -> str:
    """What the number of groups communicating at once did to this kind of call, where measured,
    and whether the host had more ranks than CPUs."""
    host = next((h for h in hosts if s.ranks and s.ranks[0] in h.ranks), None)
    if host is None:
        return ""
    out = []
    found = host.comparison() if host.sample == (s.api, s.bytes_per_call) else None
    if found is not None:
        lo, lo_us, hi, hi_us = found
        out.append(f"with {lo} group{'s' if lo > 1 else ''} communicating at once on host {host.host}: {lo_us:.0f} µs; "
                   f"with {hi}: {hi_us:.0f} µs")
    unhurt = found is not None and found[3] < CONTENDED * found[1]  # measured: more at once cost no more
    if host.cpus is not None and len(host.ranks) > host.cpus and not unhurt:
        out.append(f"{len(host.ranks)} ranks share {host.cpus_text} there: groups communicating at once can "
                   "slow each other down")
    return f" ({'; '.join(out)})" if out else ""


def _overlap_columns(events: dict) -> tuple[list[tuple], list[tuple]]:
    """Per fold of ranks with equal columns (key ids, synchronous, issue µs, completion µs,
    completed and not P2P, its ranks), and the keys (site, api, op, group, role) the ids index:
    from model.Timings (its folds), or from events (objects with model.Event's fields, a rank a
    fold)."""
    if isinstance(events, Timings):
        ids, keys = events.site_keys()
        return [(k, f.t.sync, f.t.issue, f.t.done, f.t.ok & ~events.p2p[f.t.sig], f.weight)
                for k, f in zip(ids, events.folds)], keys
    at: dict[tuple, int] = {}
    out = []
    for evs in events.values():
        key = np.array([at.setdefault((e.site, e.sig.api, e.sig.op, e.group, e.sig.role), len(at)) for e in evs],
                       dtype=np.int64)
        timed = [e.t_done is not None and e.error is None and e.sig.op not in P2P_OPS for e in evs]
        out.append((key, np.array([not (e.async_op or e.native) for e in evs], dtype=bool),
                    ints([e.t_issue for e in evs], EXACT), ints([e.t_done if t else 0 for e, t in zip(evs, timed)], EXACT),
                    np.array(timed, dtype=bool), 1))
    return out, list(at)


def overlap_hints(sites: list[SiteStats], events: dict) -> list[Hint]:
    """`events`: model.Timings (or rank -> its events)."""
    cols, keys = _overlap_columns(events)
    sync_only = np.ones(len(keys), dtype=bool)
    found = []  # per fold: (key, gap µs, what could be hidden µs) of each collective followed by another
    for key, sync, issue, done, timed, _ in cols:
        sync_only[key[~sync]] = False
        issues = np.sort(issue)
        after = np.searchsorted(issues, done[timed], side="right")
        known = after < len(issues)  # (the rank's last collective: what follows is not known)
        which = np.flatnonzero(timed)[known]
        gap = issues[after[known]] - done[which]
        found.append((key[which], gap, np.minimum(done[which] - issue[which], gap)))
    key = np.concatenate([k for k, _, _ in found]) if found else np.zeros(0, np.int64)
    fold = np.repeat(np.arange(len(found)), [len(k) for k, _, _ in found]) if found else key
    weight = np.array([c[5] for c in cols], dtype=np.int64)[fold] if found else key
    gaps = np.concatenate([g for _, g, _ in found]) if found else key
    order, runs, run_key, _, first_run = by_key(key, fold) if len(key) else (key, key, key, key, key)
    # per key: the most a rank could hide (µs), and where its gaps are
    hidden = np.maximum.reduceat(np.add.reduceat(summable(np.concatenate([c for _, _, c in found]))[order], runs),
                                 first_run).tolist() if len(key) else []
    keyed = dict(zip(run_key[first_run].tolist(), range(len(first_run))))
    bounds = np.append(runs[first_run], len(order)).tolist() if len(key) else []
    gaps, weight = gaps[order], weight[order]
    at = {k: i for i, k in enumerate(keys)}
    out = []
    for s in sites:
        k = at.get((s.site, s.api, s.op, s.group, s.role))
        if k is None or not sync_only[k] or k not in keyed:
            continue
        j = keyed[k]
        gain = (0.0 + hidden[j]) / 1e6
        if gain < MIN_HIDDEN_S or gain < MIN_HIDDEN_SHARE * s.total_s:
            continue
        gap = median(Sample(gaps[bounds[j]:bounds[j + 1]], weight[bounds[j]:bounds[j + 1]]))
        where = where_text(s.site)
        text = (f"{where}: {s.api} is synchronous ({s.calls} calls per rank, {s.total_s:.4f} s inside them, median "
                f"{s.median_us:.0f} µs) and each is followed by {gap:.0f} µs (median) of work before the next "
                f"collective: if that work does not read the result, issue it with async_op=True and wait() on "
                f"the handle where the result is first used: up to {gain:.4f} s could run hidden behind it")
        out.append(Hint("overlap", s.site, gain, text, {
            "calls_per_rank": s.calls, "total_s": round(s.total_s, 6), "median_gap_us": gap,
            "hidden_s": round(gain, 6)}))
    return out


def hints(run: Run, sites: list[SiteStats], skew: Skew, timings: Timings, hosts: list) -> list[Hint]:
    """Every hint of these kinds, most time to gain first. `timings`: model.Timings; `hosts`:
    concurrency.host_load."""
    fuse = fuse_hints(run, sites, timings)
    found = (fuse + batch_hints(sites, {h.site for h in fuse}, hosts) + straggler_hints(skew, sites)
             + overlap_hints(sites, timings))
    return _one_per_site(sorted(found, key=lambda h: -h.gain_s))


def _one_per_site(found: list[Hint]) -> list[Hint]:
    """A line issuing the same pattern in several groups (a group per pair of ranks) is one hint: the
    group with most to gain, and how many groups do the same."""
    out, first = [], {}
    for h in found:
        key = (h.kind, h.site)
        if h.site is None or key not in first:
            first[key] = h
            out.append(h)
        else:
            first[key].evidence["same_in_groups"] = first[key].evidence.get("same_in_groups", 1) + 1
    for h in out:
        if h.evidence.get("same_in_groups", 1) > 1:
            h.text += f" (the same in each of {h.evidence['same_in_groups']} groups; the figures are its busiest)"
    return out
