"""Hints about process groups: groups created but barely used, and groups that slow each other
down by communicating at once on one host (concurrency.py measures it).

A group costs every member something for as long as it lives (gloo: a connection to each other
member and its own worker threads; NCCL: a communicator and its buffers on every GPU) and its
creation is a collective of every rank of the job; a group used for one or two collectives
rarely pays for that.
"""

from __future__ import annotations

from .concurrency import HostLoad
from .hints import CONTENDED, Hint, where_text
from .sites import GroupStats

BARELY_USED = 2  # a group with at most this many collectives per rank is barely used
MIN_BARELY_USED = 2  # ... and a hint needs at least this many such groups


def _creations(run) -> dict[int, list[tuple[str | None, int | None]]]:
    """Per rank, (group name, µs it took) of each new_group / split_group call. Every rank calls
    new_group for every group, members or not, in the same order, and only members get a name
    back: a non-member's k-th call is named after a member's k-th (groups created with
    use_local_synchronization, by their members only, keep only the names they have)."""
    seqs = {r: [c for c in log.creations if c.op in ("new", "split")] for r, log in run.ranks.items()}
    names = {r: [c.name for c in s] for r, s in seqs.items()}
    if any(None in ns for ns in names.values()):  # (non-members: named after a member's)
        aligned = len({len(s) for s in seqs.values()}) == 1
        name_at = [next((n for n in col if n is not None), None) for col in zip(*names.values())] if aligned else []
        names = {r: [n if n is not None or not aligned else name_at[k] for k, n in enumerate(ns)]
                 for r, ns in names.items()}
    return {r: list(zip(names[r], [c.took_us for c in s])) for r, s in seqs.items()}


def barely_used_hints(run, groups: dict[str, GroupStats]) -> list[Hint]:
    created: dict[str, list] = {}  # group -> its creations by its members
    for log in run.ranks.values():
        for c in log.creations:
            if c.op in ("new", "split") and c.member and c.name is not None:
                created.setdefault(c.name, []).append(c)
    used = {name: groups[name].calls if name in groups else 0 for name in created}
    barely = sorted([n for n, calls in used.items() if calls <= BARELY_USED], key=lambda n: (len(n), n))
    if len(barely) < MIN_BARELY_USED:
        return []
    few = set(barely)
    took = {r: sum([us or 0 for name, us in calls if name in few]) for r, calls in _creations(run).items()}
    gain = max(took.values(), default=0) / 1e6
    site = min([c.site for n in barely for c in created[n] if c.site is not None], default=None)
    where = where_text(site)
    shown = ", ".join(f"{n} ({used[n]})" for n in barely[:8]) + (" ..." if len(barely) > 8 else "")
    text = (f"{where}: {len(barely)} of the {len(created)} groups created were used for at most {BARELY_USED} "
            f"collectives per rank (group (collectives): {shown}); creating them took {gain:.4f} s on the rank "
            "that spent the most, and each holds resources on its members while it lives (gloo: a connection "
            "per peer and worker threads; NCCL: a communicator and its buffers on every GPU): create a group "
            "once and reuse it, or destroy_process_group(group) when done with it")
    return [Hint("groups", site, gain, text, {"barely_used": {n: used[n] for n in barely},
                                                "created": len(created), "creation_s": round(gain, 6)})]


def contention_hints(hosts: list[HostLoad]) -> list[Hint]:
    out = []
    for h in hosts:
        found = h.comparison()
        if found is None:
            continue
        lo, lo_us, hi, hi_us = found
        if hi_us < CONTENDED * lo_us:
            continue
        extra_us = sum((h.median_us(k) - lo_us) * len(v) for k, v in h.by_count.items() if k > lo)
        gain = max(0.0, extra_us) / len(h.ranks) / 1e6
        api, nbytes = h.sample
        crowded = h.cpus is not None and len(h.ranks) > h.cpus
        text = (f"host {h.host}: {api} of {nbytes} bytes took {hi_us:.0f} µs (median) while {hi} groups "
                f"communicated at once, {lo_us:.0f} µs while {lo} did ({hi_us / lo_us:.1f}x; "
                f"{len(h.by_count[hi])} and {len(h.by_count[lo])} collectives): the groups' collectives slow "
                f"each other down; {len(h.ranks)} ranks share {h.cpus_text}"
                + (" (more ranks than CPUs: run fewer ranks per host)" if crowded else "")
                + f"; letting the groups take turns, or one collective over their union where the math "
                f"allows, would save up to about {gain:.4f} s per rank")
        out.append(Hint("contention", h.sample_site, gain, text, {
            "host": h.host, "ranks": len(h.ranks), "cpus": h.cpus, "at_once": {lo: lo_us, hi: hi_us},
            "collectives": {lo: len(h.by_count[lo]), hi: len(h.by_count[hi])}}))
    return out


def group_hints(run, groups: dict[str, GroupStats], hosts: list[HostLoad]) -> list[Hint]:
    return barely_used_hints(run, groups) + contention_hints(hosts)
