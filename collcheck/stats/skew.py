"""Arrival skew and stragglers: who comes last to each collective, and how long the others wait.

A collective completes at nearly the same instant on every member (its last message arrives
everywhere at once), whenever each rank issued it. So the ranks' clocks are aligned on the
completions of the collectives every member completed (per rank, the median difference to the
lowest rank of the largest group), which also holds across hosts whose clocks differ. Then, per
slot (group, position) every member completed: the rank that issued it last, and how long each
other member had been waiting for it. The last rank is charged with the part of that waiting its
own work caused: each rank's work before the collective is the time from the completion of its
previous collective to this issue (its own clock); a member waited for the last rank's work by at
most the difference of the two. So a rank that is last only because the previous collective
completed later on it (in a pair all-reducing back to back, the same rank gets the last message
every time) is not a straggler: its work took no longer. A rank's first collective is not
charged either: the ranks reach it at whatever times their start-up allows.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from ..model import P2P_OPS, Run, Sequences


@dataclass
class Straggler:
    rank: int
    wait_caused_us: float = 0.0  # the others' waiting for its longer work, in the collectives it issued last
    last_in: int = 0  # collectives it issued last
    slots: int = 0  # collectives it took part in (every member completed them)
    expected_last: float = 0.0  # how many of them it would issue last by chance (1/members each)


@dataclass
class Skew:
    offsets_us: dict[int, float]  # rank -> its clock minus the reference rank's
    stragglers: list[Straggler]  # most waiting caused first
    # (group, position, last rank, waiting caused µs, its site, its issue µs on the reference clock)
    slots: list[tuple] = field(default_factory=list)
    _by_slot: dict | None = field(default=None, init=False, repr=False)

    def waited_us(self, group: str, position: int, rank: int, issued_us: float) -> float | None:
        """How long `rank`, which issued this slot at `issued_us` (its own clock), waited for the last
        member to issue it; None for a slot not charged (a first collective, a tie, incomplete)."""
        if self._by_slot is None:
            self._by_slot = {(g, p): (last, t) for g, p, last, _, _, t in self.slots}
        last, t = self._by_slot.get((group, position), (None, None))
        return None if last is None else max(0.0, t - (issued_us - self.offsets_us.get(rank, 0.0)))


def _completed_slots(run: Run, sequences: Sequences, events: dict[int, list]):
    """(group, position, {rank: (issue µs, completion µs, call site, its work before it µs or None)},
    whether it is some member's first collective) of every collective all members completed."""
    first: dict[int, int] = {}
    for name in run.group_names():
        for r, idx in sequences.group(name).index.items():
            if idx:
                first[r] = min(first.get(r, idx[0]), idx[0])
    for name in run.group_names():
        seqs = sequences.group(name)
        members = [r for r in (run.group_members(name) or sorted(seqs.index)) if r in run.ranks]
        if len(members) < 2 or any(r not in seqs.index for r in members):
            continue
        n = min(len(seqs.index[r]) for r in members)
        for pos in range(n):
            times, startup = {}, False
            for r in members:
                i = seqs.index[r][pos]
                startup |= i == first[r]
                e = events[r][i]
                if e.sig.op in P2P_OPS or e.t_done is None or e.error is not None:
                    break
                prev = events[r][i - 1] if i > 0 else None
                work = max(0, e.t_issue - prev.t_done) if prev is not None and prev.t_done is not None else None
                times[r] = (e.t_issue, e.t_done, e.site, work)
            else:
                yield name, pos + seqs.start, times, startup


def _caused(waited: float, work_last: int | None, work_other: int | None) -> float:
    """How much of a member's waiting the last rank's longer work explains (all of it when unknown)."""
    if work_last is None or work_other is None:
        return waited
    return min(waited, max(0, work_last - work_other))


def arrival_skew(run: Run, events: dict[int, list]) -> Skew:
    """`events`: sites.rank_events."""
    slots = list(_completed_slots(run, Sequences(run), events))
    # clocks: against the lowest rank of the largest group, from completions
    reference_group = max(run.group_names(), key=lambda g: (len(run.group_members(g)), g == "0"), default=None)
    ref = min(run.group_members(reference_group) or [0]) if reference_group is not None else 0
    diffs: dict[int, list[float]] = {}
    for _, _, times, _ in slots:
        if ref in times:
            for r, (_, done, _, _) in times.items():
                diffs.setdefault(r, []).append(done - times[ref][1])
    offsets = {r: statistics.median(d) for r, d in diffs.items()}
    table = {r: Straggler(r) for r in run.ranks}
    charged = []
    for name, pos, times, startup in slots:
        if startup:
            continue
        arrivals = {r: t[0] - offsets.get(r, 0.0) for r, t in times.items()}
        last = max(arrivals, key=lambda r: (arrivals[r], -r))
        waited = sum(arrivals[last] - a for r, a in arrivals.items() if r != last)
        if waited <= 0:  # every member issued it at the same instant: nobody came last
            continue
        table[last].wait_caused_us += sum(_caused(arrivals[last] - arrivals[r], times[last][3], times[r][3])
                                          for r in times if r != last)
        table[last].last_in += 1
        for r in times:
            table[r].slots += 1
            table[r].expected_last += 1 / len(times)
        charged.append((name, pos, last, waited, times[last][2], arrivals[last]))
    stragglers = sorted(table.values(), key=lambda s: (-s.wait_caused_us, s.rank))
    return Skew(offsets, stragglers, charged)
