"""Ranks that issue the same collective from different places in their program.

Two ranks can issue equal collectives in a slot (same op, shapes, group) while being at
different points of their program: rank 0 runs an extra forward pass whose normalisation layer
all-gathers its statistics from the same line, with the same shape, as the training pass rank 1
is in. The signatures agree; only the user's call chain tells the slots apart, and the matcher
sees the damage collectives later (or never). A slot is such a divergence when the members issue
it from the same call site by different chains, one of them a chain on which all of them met
earlier and one a chain they never met on: they used to agree on that way to the call, now a
rank comes from elsewhere. Different call sites (an `if rank == 0` branch that issues the same
broadcast from another line) and ways all ranks have taken (a data-dependent branch above a
shared helper) are how the program is written, not a divergence.
"""

from __future__ import annotations

from array import array

from ..model import GroupSequences, Run
from .align import stands_in
from .findings import Finding


def chain_findings(run: Run, seqs: GroupSequences, members: list[int], upto: int | None) -> list[Finding]:
    """The first slot before `upto` (the group's first other finding; None: none) where the
    members issue equal collectives from chains that differ, one of them a chain all met on."""
    if len(members) < 2 or any(r not in seqs.index for r in members):
        return []
    end = min(len(seqs.seq[r]) for r in members)
    if upto is not None:
        end = min(end, upto)
    end = min(end, _common_prefix(seqs, members, end))
    logs = [run.ranks[r] for r in members]
    if all(log.chain_sites == logs[0].chain_sites for log in logs[1:]) and len(
            {log.local_chains(seqs.index[log.rank], end).tobytes() for log in logs}) == 1:
        return []  # the same chains, interned alike: nothing to compare (the common case, C speed)
    columns: dict[bytes, list[int]] = {}  # distinct chain columns -> the ranks that have it
    for r in members:
        col = run.ranks[r].chains_of(seqs.index[r], end)
        columns.setdefault(col.tobytes(), []).append(r)
    if len(columns) < 2:
        return []
    holders = list(columns.values())
    cols = [array("I", b) for b in columns]
    met: set[int] = set()  # chains every member issued a collective of this group from, in one slot
    for k in range(end):
        here = [c[k] for c in cols]
        first = here[0]
        if all(c == first for c in here):
            if first:
                met.add(first)
            continue
        if 0 in here or not _diverted(run, here, met) or _stands_in(run, seqs, k, holders):
            continue
        return [_finding(run, seqs, k, here, holders, met)]
    return []


def _diverted(run: Run, here: list[int], met: set[int]) -> bool:
    """The same call site reached by ways that differ, one of them a way all ranks met on and one
    a way they never met on. A site that differs is a branch (`if x: all_reduce(a) else:
    all_reduce(b)`); two ways they all met on are a data-dependent branch above a shared helper."""
    if len({run.chains[c][-1] for c in here}) != 1:
        return False
    return any(c in met for c in here) and not all(c in met for c in here)


def _stands_in(run: Run, seqs: GroupSequences, k: int, holders: list[list[int]]) -> bool:
    return any(stands_in(run.ranks[rs[0]].event(seqs.index[rs[0]][k])) for rs in holders)


def _common_prefix(seqs: GroupSequences, members: list[int], end: int) -> int:
    """How many slots from the start every member's signature agrees with the first member's."""
    ref = seqs.seq[members[0]]
    n = end
    for r in members[1:]:
        a = seqs.seq[r]
        if a[:n] == ref[:n]:
            continue
        lo, hi = 0, n  # equal up to lo, different within [0, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[:mid] == ref[:mid]:
                lo = mid
            else:
                hi = mid
        n = lo
    return n


def _finding(run: Run, seqs: GroupSequences, k: int, here: list[int], holders: list[list[int]],
             met: set[int]) -> Finding:
    """Culprits: the ranks whose way to the call is not one they all met on (the extra pass)."""
    culprits = sorted(r for c, rs in zip(here, holders) for r in rs if c not in met)
    reference = min(r for rs in holders for r in rs if r not in culprits)
    events = {r: run.ranks[r].event(seqs.index[r][k]) for rs in holders for r in rs[:16]}
    events.setdefault(reference, run.ranks[reference].event(seqs.index[reference][k]))
    times = [e.t_issue for e in events.values() if e is not None]
    return Finding("semantic_mismatch", seqs.name, k, culprits, "", events, events[reference],
                   {"chains": True}, min(times) if times else 0)
