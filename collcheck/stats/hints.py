"""What to change, with the numbers that say so, most time to gain first.

- `fuse`: one call site issues its collectives back to back in a loop (a collective per parameter,
  per buffer): each pays the collective's fixed cost. The gain is estimated from this run's own
  calls, a fixed cost plus bytes over bandwidth fitted to every completed collective of the op:
  one call per loop of all its bytes against what the loop took.
- `straggler`: one rank issued most collectives last; the others waited for it (skew.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..model import P2P_OPS, Run, rank_ranges
from .sites import SiteStats
from .skew import Skew

MIN_LOOP = 3  # collectives back to back from one site that make a loop worth fusing
MIN_SHARE = 0.75  # a straggler issued at least this share of collectives last (else: noise)


@dataclass
class Hint:
    kind: str
    site: tuple | None
    gain_s: float  # estimated time saved (fuse) or waiting caused (straggler)
    text: str
    evidence: dict = field(default_factory=dict)


def _loops(run: Run, site: SiteStats, events: dict[int, list]) -> list[int]:
    """How many collectives one pass of the loop issues, for each run of this site's collectives
    issued back to back (rank by rank, in its group's order): the run's shortest period of sizes
    (a per-parameter loop repeats its parameters' sizes every step); runs of at least two."""
    periods = []
    for rank in site.ranks:
        evs = events[rank]
        sizes: list[int] = []
        for e in [*(evs[i] for i in run.ranks[rank].group_events(site.group)), None]:
            if e is not None and e.site == site.site and e.sig.api == site.api and e.sig.role == site.role:
                sizes.append(e.sized.nbytes)
                continue
            if len(sizes) >= 2:
                periods.append(_period(sizes))
            sizes = []
    return periods


def _period(seq: list) -> int:
    n = len(seq)
    return next((p for p in range(1, n // 2 + 1) if n % p == 0 and seq[p:] == seq[:-p]), n)


def _cost_model(events: dict[int, list], op: str) -> tuple[float, float] | None:
    """(fixed µs, µs per byte) fitted by least squares to every completed collective of `op`."""
    points = [(e.sized.nbytes, e.t_done - e.t_issue) for evs in events.values()
              for e in evs if e.sig.op == op and e.t_done is not None and e.error is None]
    if len(points) < 3:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in points) / var) if var else 0.0
    fixed = max(0.0, statistics.median(y - slope * x for x, y in points))  # robust to a few slow calls
    return fixed, slope


def fuse_hints(run: Run, sites: list[SiteStats], events: dict[int, list]) -> list[Hint]:
    out, models = [], {}
    for s in sites:
        if s.op in P2P_OPS or s.calls < MIN_LOOP or not s.durations_us:
            continue
        loops = _loops(run, s, events)
        if not loops or statistics.median(loops) < MIN_LOOP:
            continue
        if s.op not in models:  # (one fit per op, whatever the number of sites)
            models[s.op] = _cost_model(events, s.op)
        model = models[s.op]
        if model is None:
            continue
        fixed, per_byte = model
        per_loop = statistics.median(loops)
        n_loops = s.calls / per_loop
        fused_s = n_loops * (fixed + per_byte * s.bytes_per_call * per_loop) / 1e6
        gain = s.total_s - fused_s
        if gain <= 0:
            continue
        where = f"{s.site[0]}:{s.site[1]}" if s.site else "?"
        text = (f"{where}: {s.api} issued {per_loop:g} times in a loop ({s.calls} calls per rank, median "
                f"{s.bytes_per_call} bytes): {s.total_s:.4f} s inside them; one {s.api} of each loop's tensors "
                f"flattened together (or bucketed) would take about {fused_s:.4f} s here (fixed cost "
                f"{fixed:.0f} µs per call in this run): about {gain:.4f} s less")
        out.append(Hint("fuse", s.site, gain, text, {
            "calls_per_rank": s.calls, "per_loop": per_loop, "bytes_per_call": s.bytes_per_call,
            "total_s": round(s.total_s, 6), "fused_s": round(fused_s, 6), "fixed_us": round(fixed, 1),
            "us_per_byte": per_byte}))
    return out


def straggler_hints(run: Run, skew: Skew) -> list[Hint]:
    if not skew.stragglers or not skew.slots:
        return []
    top = skew.stragglers[0]
    total = sum(s.wait_caused_us for s in skew.stragglers)
    if not top.slots or top.last_in / top.slots < MIN_SHARE or total <= 0:
        return []
    worst = max((x for x in skew.slots if x[2] == top.rank), key=lambda x: x[3], default=None)
    site = worst[4] if worst is not None else None  # where it kept the others waiting longest
    text = (f"rank {top.rank} issued {top.last_in} of its {top.slots} collectives last "
            f"({100 * top.last_in / top.slots:.0f} %): the others waited {top.wait_caused_us / 1e6:.4f} s for it "
            f"({100 * top.wait_caused_us / total:.0f} % of all waiting; ranks {rank_ranges([s.rank for s in skew.stragglers])}); "
            "look at what it does before them (data loading, uneven work, a slower device or host)")
    return [Hint("straggler", site, top.wait_caused_us / 1e6, text,
                 {"rank": top.rank, "last_in": top.last_in, "slots": top.slots,
                  "wait_caused_s": round(top.wait_caused_us / 1e6, 6)})]


def hints(run: Run, sites: list[SiteStats], skew: Skew, events: dict[int, list]) -> list[Hint]:
    return sorted(fuse_hints(run, sites, events) + straggler_hints(run, skew), key=lambda h: -h.gain_s)
