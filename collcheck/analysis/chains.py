"""Ranks that issue the same collective from different places in their program.

Two ranks can issue equal collectives in a slot (same op, shapes, group) while being at
different points of their program: rank 0 runs an extra forward pass whose normalisation layer
all-gathers its statistics from the same line, with the same shape, as the training pass rank 1
is in; a Trainer rank that stopped early all-gathers its end-of-training count, one int64, where
the others all-gather a step's count. The signatures agree; only the call chain tells the slots
apart, and the matcher sees the damage collectives later (or never). A slot is such a divergence
when the members reach it by different chains, one of them a chain on which all of them met
earlier and one a chain they never met on: they used to agree on that way to the call, now a
rank comes from elsewhere. Chains none of them met on (an `if rank == 0` branch that issues the
same broadcast from another line) and ways all ranks have taken (a data-dependent branch above a
shared helper) are how the program is written, not a divergence. A rank out of phase with the
loop all of them ran (a skipped call between two equal ones) is one too.

Where two camps pair equal calls from different chains and the trace says they part there, or
their group diverges later (the calls paired silently and the damage shows slots on), the
program's source (analysis/source.py) is asked first: a rank-dependent branch around one camp's
call and not the other's is where they parted, and it says who.
"""
from __future__ import annotations

from array import array

from ..knowledge.frameworks import framework_call
from ..model import GroupSequences, Run
from . import blame
from .align import stands_in
from .findings import Finding


def chain_findings(run: Run, seqs: GroupSequences, members: list[int], upto: int | None,
                   source=None) -> list[Finding]:
    """The first slot before `upto` (the group's first other finding; None: none) where the
    members issue equal collectives from chains that differ, one of them a chain all met on, or
    where the program's source (`source`: analysis/source.py, or None) says one camp took a
    rank-dependent branch to reach its call."""
    index = seqs.index
    if len(members) < 2 or not all([r in index for r in members]):
        return []
    end = min([len(seqs.seq[r]) for r in members])
    if upto is not None:
        end = min(end, upto)
    end = min(end, _common_prefix(seqs, members, end))
    if not end:
        return []  # (no slot to compare)
    if _same_chains(run, index, members, end):
        return []  # the same chains, interned alike: nothing to compare (the common case, C speed)
    holders, cols = _columns(run, seqs, members, end)
    if len(cols) < 2:
        return []
    met: set[int] = set()  # chains every member issued a collective of this group from, in one slot
    checks = 0
    asked: set[tuple] = set()  # pairs of chains the source said nothing of
    source = source if run.source != "flight-recorder" else None  # (as the aligner's ties: none there)
    for k in range(end):
        here = [c[k] for c in cols]
        first = here[0]
        if all(c == first for c in here):
            if first:
                met.add(first)
            continue
        if 0 in here or _stands_in(run, seqs, k, holders):
            continue
        diverted = _diverted(run, here, met)
        broke = None
        if not diverted:
            checks += 1
            # (a Flight Recorder dump labels nothing: a rank's chain off the loop may be join()'s shadow)
            loops = checks <= MAX_LOOP_CHECKS and run.source != "flight-recorder"
            broke = _broke_the_loop(cols, seqs.seq[members[0]], k) if loops else None
        if source is not None and len(here) == 2 and (diverted or broke or upto is not None) \
                and len(asked) < MAX_SOURCE_READS and tuple(here) not in asked:
            told = _from_source(run, seqs, k, here, holders, met, source)
            if told is not None:
                return [told]
            asked.add(tuple(here))
        if diverted:
            return [_finding(run, seqs, k, here, holders, met)]
        if broke:
            culprits = sorted(r for i in broke for r in holders[i])
            return [_finding(run, seqs, k, here, holders, met, culprits, _LOOP)]
    return []


def _columns(run: Run, seqs: GroupSequences, members: list[int], end: int) -> tuple[list, list]:
    """(the ranks of each distinct chain column, the columns) of the first `end` slots: ranks read by
    kinds share their chain columns and indices, so each distinct pair is compared once."""
    kinds: dict[tuple, list[int]] = {}
    for r in members:
        log = run.ranks[r]
        kinds.setdefault((id(log.chain), id(log.chain_sites), id(seqs.index[r])), []).append(r)
    columns: dict[bytes, list[int]] = {}  # distinct chain columns -> the ranks that have it
    for ranks in kinds.values():
        col = run.ranks[ranks[0]].chains_of(seqs.index[ranks[0]], end)
        columns.setdefault(col.tobytes(), []).extend(ranks)
    for ranks in columns.values():
        ranks.sort()
    return list(columns.values()), [array("I", b) for b in columns]


MAX_SOURCE_READS = 8  # pairs of the two camps' chains read against the program's source, per group
_LOOP = "it reached the call by another line than its loop reaches it there every time before"


def _from_source(run: Run, seqs: GroupSequences, k: int, here: list[int], holders: list[list[int]],
                 met: set[int], source) -> Finding | None:
    """The finding at slot k when the program's source says which of two camps took a
    rank-dependent branch to reach its call: with no majority the source names the camp out of
    step (Reading.culprit), with one the majority does and the source says what it did."""
    told = source.read(run.chains[here[0]], run.chains[here[1]], run.world)
    if told is None:
        return None
    a, b = holders
    camp = told.culprit(run.world) if len(a) == len(b) else int(len(b) < len(a))
    f = _finding(run, seqs, k, here, holders, met, holders[camp], told.rule(camp))
    f.details.update(decided_by="source" if len(a) == len(b) else "majority",
                     condition=dict(zip(("file", "line", "text"), told.condition)))
    return f


def _same_chains(run: Run, index: dict, members: list[int], end: int) -> bool:
    """Whether every member reached the first `end` slots by the same chains, interned alike (the
    same chain tables): ranks read by kinds (the same chain column, keys and indices) need no look."""
    first = run.ranks[members[0]]
    idx = index[members[0]]
    table, chains = first.chain_table, None
    for r in members[1:]:
        log = run.ranks[r]
        if log.chain is first.chain and log.chain_sites is first.chain_sites and index[r] is idx:
            continue
        if log.chain_table != table:
            return False
        if chains is None:
            chains = first.local_chains(idx, end)
        if log.local_chains(index[r], end) != chains:
            return False
    return True


MAX_LOOP_CHECKS = 64  # slots whose chains differ that are read against the ranks' loops


def _broke_the_loop(cols: list[array], sigs: array, k: int) -> list[int]:
    """The columns (ranks) that reached slot k by another chain than the loop they all ran until
    then predicts, while the others took the predicted one: a rank out of phase with the loop (a
    skipped call between two equal ones). Only where every rank ran the same chains in the same
    order before: chains that differ by rank by design (`if rank == 0: f() else: g()` around a
    helper) are no loop broken."""
    lo = max(0, k - blame.HISTORY)
    history = cols[0][lo:k]
    if any(col[lo:k] != history for col in cols[1:]):
        return []
    p = blame.predict(list(zip(sigs[lo:k], history)))  # the loop of calls, not of chains alone
    if p is None or p[0] != sigs[k] or all(col[k] != p[1] for col in cols):
        return []
    return [i for i, col in enumerate(cols) if col[k] != p[1]]


def _diverted(run: Run, here: list[int], met: set[int]) -> bool:
    """Equal collectives reached by ways that differ, one of them a way all ranks met on and one a
    way they never met on: a rank left the path they shared. From one call site; or from another
    where a framework names the new way (a Trainer's end-of-training gather meeting the others'
    per-step gather of the same shape: each through its own helper). Two ways they never met on
    are a branch by design (`if rank == 0: broadcast(a) else: broadcast(b)`); two ways they all
    met on, a data-dependent branch above a shared helper; a torch internal standing in for the
    others' calls from its own site (join()'s shadows) has no framework name here."""
    if all(c in met for c in here) or not any(c in met for c in here):
        return False
    if len({run.chains[c][-1] for c in here}) == 1:
        return True
    return all(framework_call(run.chains[c]) is not None for c in here if c not in met)


def _stands_in(run: Run, seqs: GroupSequences, k: int, holders: list[list[int]]) -> bool:
    return any(stands_in(run.ranks[rs[0]].event(seqs.index[rs[0]][k])) for rs in holders)


def _common_prefix(seqs: GroupSequences, members: list[int], end: int) -> int:
    """How many slots from the start every member's signature agrees with the first member's."""
    ref = seqs.seq[members[0]]
    n = end
    for r in members[1:]:
        a = seqs.seq[r]
        if a is ref or (len(a) == len(ref) == n and a == ref) or a[:n] == ref[:n]:
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
             met: set[int], culprits: list[int] | None = None, blame: str | None = None) -> Finding:
    """Culprits: the ranks whose way to the call is not one they all met on (the extra pass), or
    those a rule named (`culprits`, and why: `blame`)."""
    if culprits is None:
        culprits = sorted(r for c, rs in zip(here, holders) for r in rs if c not in met)
    reference = min(r for rs in holders for r in rs if r not in culprits)
    events = {r: run.ranks[r].event(seqs.index[r][k]) for rs in holders for r in rs[:16]}
    events.setdefault(reference, run.ranks[reference].event(seqs.index[reference][k]))
    times = [e.t_issue for e in events.values() if e is not None]
    details = {"chains": True}
    if blame is not None:
        details["blame"] = blame
    return Finding("semantic_mismatch", seqs.name, k, culprits, "", events, events[reference],
                   details, min(times) if times else 0)
