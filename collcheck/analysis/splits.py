"""all_to_all_single split sizes, checked pairwise.

An all-to-all's tensors may differ in size from rank to rank, so its signature leaves sizes
out (capture.wire.SHAPE_FREE_OPS) and the aligner cannot see a size mismatch there. What must agree is
pairwise: what rank i sends to rank j (its input split j) is what rank j expects from rank i
(its output split i). Empty split lists mean even splits of dim 0; with both lists empty the
output has the input's size (gloo and NCCL check this locally). Pairs whose sizes cannot be
known from the record (empty output splits next to explicit input splits) are not judged.
"""

from __future__ import annotations

from ..model import GroupSequences, Run
from .findings import Finding

MAX_PAIRS = 8  # pairs kept in a finding's details


def split_findings(run: Run, seqs: GroupSequences, before: int | None) -> list[Finding]:
    """The first all_to_all_single of the group (before position `before`, where the aligner
    found the group's first divergence) whose ranks disagree on what they send each other."""
    members = run.group_members(seqs.name)
    if len(members) < 2 or any(r not in run.ranks or r not in seqs.index for r in members):
        return []
    at: dict[int, dict[int, tuple]] = {}  # position -> rank -> (event index, sizes)
    for r in members:
        for ev, sizes in run.ranks[r].a2a_by_group.get(seqs.name, {}).items():
            p = seqs.slot(r, ev)
            if p is not None and (before is None or p < before):
                at.setdefault(p, {})[r] = (ev, sizes)
    for p in sorted(at):
        if len(at[p]) != len(members):
            continue
        sizes = [at[p][r][1] for r in members]
        pairs = mismatched_pairs(sizes)
        if pairs:
            return [_finding(run, seqs.name, p, members, at[p], pairs)]
    return []


def mismatched_pairs(sizes: list[tuple]) -> list[tuple[int, int, int, int]]:
    """(sender, receiver, elements sent, elements expected) by group rank, for every pair that
    disagrees, a rank with itself included (gloo checks that one locally: 'inLengthPerRank[myRank]
    == outLengthPerRank[myRank]'); `sizes[i]` = (input rows, elements per row, input splits,
    output splits)."""
    n = len(sizes)
    sent, expected = [], []
    for rows, per_row, ins, outs in sizes:
        send = list(ins) if ins else ([rows // n] * n if rows % n == 0 else None)
        if outs:
            recv = list(outs)
        elif not ins:
            recv = send  # both even: the output is the input's size
        else:
            recv = None
        sent.append(None if send is None or len(send) != n else [k * per_row for k in send])
        expected.append(None if recv is None or len(recv) != n else [k * per_row for k in recv])
    out = []
    for i in range(n):
        for j in range(n):
            if sent[i] is not None and expected[j] is not None and sent[i][j] != expected[j][i]:
                out.append((i, j, sent[i][j], expected[j][i]))
    return out


def _finding(run: Run, group: str, position: int, members: list, events: dict, pairs: list) -> Finding:
    pairs_global = [(members[i], members[j], s, e) for i, j, s, e in pairs]
    involved = {r for i, j, _, _ in pairs_global for r in (i, j)}
    # a rank in every disagreeing pair (stale counts on one rank) is the culprit; else all of them
    common = set.intersection(*({i, j} for i, j, _, _ in pairs_global))
    culprits = sorted(common) if len(common) == 1 and len(pairs_global) > 1 else sorted(involved)
    shown = members if len(members) <= 16 else sorted(involved)[:64]
    evs = {r: run.ranks[r].event(events[r][0]) for r in shown}
    others = [r for r in shown if r not in culprits]
    times = [e.t_issue for e in evs.values()]
    details = {"pairs": [list(x) for x in pairs_global[:MAX_PAIRS]], "pairs_total": len(pairs_global)}
    return Finding("split_mismatch", group, position, culprits, "", evs, evs[others[0]] if others else None,
                   details, min(times) if times else 0)
