"""Compact rank lists for people: 0-3,5,7-1022."""

from __future__ import annotations


def rank_ranges(ranks) -> str:
    ranks = sorted(set(ranks))
    if not ranks:
        return "-"
    out = []
    start = prev = ranks[0]
    for r in ranks[1:]:
        if r == prev + 1:
            prev = r
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = r
    out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)
