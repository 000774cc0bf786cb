"""What the analysis says of each slot it judged: which ranks are out of step there, in which way,
and what the ranks in step issued. The views mark cells from this and never vote among the ranks
themselves: with two ranks a vote cannot tell the camps apart, and it would then mark the other
camp than the one the report blames.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import Event
from .findings import Finding

# how a culprit's cell reads, by the kind of finding that named it (a hang's culprits keep the
# state of their own event: pending or failed; one that never issued the call is missing)
CELL_OF_KIND = {"missing": "missing", "extra": "extra", "unmatched_p2p": "missing"}
ONLY_WHEN_ABSENT = frozenset({"hang", "deadlock"})


@dataclass(frozen=True)
class SlotVerdict:
    """One judged slot: culprit rank -> the finding's kind that names it, what the others issued
    there (None: nothing, e.g. an extra call) and the first finding's index in the report."""

    kinds: dict
    expected: Event | None
    finding: int

    def cell(self, rank: int, issued: bool) -> str | None:
        """How the rank's cell reads here ('mismatched', 'missing', 'extra'), None when the
        analysis does not blame it at this slot."""
        kind = self.kinds.get(rank)
        if kind is None:
            return None
        if not issued:
            return "missing"
        if kind in ONLY_WHEN_ABSENT:
            return None
        return CELL_OF_KIND.get(kind, "mismatched")


def slot_of(f: Finding) -> tuple | None:
    """(group, position, src, dst) of the slot a finding judges (src and dst: a point-to-point
    message's channel, else None); None for findings of no slot (group creation, a call on a
    group the rank is not in)."""
    if f.position is None or f.position < 0 or f.kind in ("group_mismatch", "non_member_call"):
        return None
    if f.details.get("p2p"):
        return f.group, f.position, f.details.get("src"), f.details.get("dst")
    return f.group, f.position, None, None


def slot_verdicts(findings: list[Finding]) -> dict[tuple, SlotVerdict]:
    """Every judged slot (`slot_of`) -> its verdict; findings at one slot (camps of different
    kinds) are joined, the first in the report's order kept for what the others issued."""
    out: dict[tuple, SlotVerdict] = {}
    for n, f in enumerate(findings):
        key = slot_of(f)
        if key is None:
            continue
        v = out.get(key)
        if v is None:
            v = out[key] = SlotVerdict({}, f.expected, n)
        for r in f.ranks:
            v.kinds.setdefault(r, f.kind)
    return out
