"""Compact rank lists for people: 0-3,5,7-1022.

A log may list a million ranks in one group record: what is shown of one list is bounded (the
first pieces, the last and the count), whatever its length.
"""

from __future__ import annotations

MAX_PIECES = 16  # runs of consecutive ranks shown of one list; the rest is counted
MAX_LISTED = 16  # members shown one by one, in their order, before a list is shown as ranges


def rank_ranges(ranks, most: int = MAX_PIECES) -> str:
    """'0-3,5,7-1022'; beyond `most` runs '0,2,4,…,2046 (1,024 ranks)'."""
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
    if len(out) > most:
        return ",".join(out[:most - 1]) + f",…,{out[-1]} ({len(ranks):,} ranks)"
    return ",".join(out)


def members_text(members) -> str:
    """A group's members as recorded: '[0, 2, 1]' (group rank order) for a short list, else
    '1,048,576 ranks: 0-1048575'."""
    members = tuple(members)
    if len(members) <= MAX_LISTED:
        return str(list(members))
    return f"{len(members):,} ranks: {rank_ranges(members)}"
