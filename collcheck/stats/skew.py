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

import numpy as np

from ..model import Run, Sequences
from ..model.timing import Timings, first_seen, stable_order
from .sample import sorted_by_key
from .slots import Slots, completed_slots


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


def arrival_skew(run: Run, timings: Timings) -> Skew:
    """`timings`: model.Timings; the members of a slot counted by class (slots.py), each class once."""
    slots = completed_slots(run, Sequences(run), timings)
    # clocks: against the lowest rank of the largest group, from completions
    reference_group = max(run.group_names(), key=lambda g: (len(run.group_members(g)), g == "0"), default=None)
    ref = min(run.group_members(reference_group) or [0]) if reference_group is not None else 0
    offsets = _offsets(slots, ref)
    table = {r: Straggler(r) for r in run.ranks}
    charged = []
    counted = ~slots.startup
    if counted.any():
        entry = slots.entry_slot()
        issue = slots.issue
        by_class = [offsets.get(rs[0], 0.0) for rs in slots.classes]
        off = np.array(by_class, dtype=object if issue.dtype == object else float)[slots.cls]
        arrival = issue - off
        latest = np.maximum.reduceat(arrival, slots.start)
        latest_at = latest[entry]
        last = np.minimum.reduceat(np.where(arrival == latest_at, slots.rank, np.iinfo(np.int64).max), slots.start)
        is_last = slots.rank == last[entry]
        waiting = latest_at - arrival
        waited = np.add.reduceat(waiting * slots.weight, slots.start)
        # how much of each member's waiting the last rank's longer work explains (all of it when unknown;
        # the last rank's class waited for nobody)
        known = slots.worked & slots.worked[is_last][entry]  # (both works known)
        longer = np.maximum(slots.work[is_last][entry] - slots.work, 0)
        caused = np.where(is_last, 0, np.where(known, np.minimum(waiting, longer), waiting))
        caused = np.add.reduceat(caused * slots.weight, slots.start)
        counted &= waited > 0  # (every member issued it at the same instant: nobody came last)
        charged = _charge(run, table, slots, counted, last, waited, caused, slots.site[is_last], latest)
    stragglers = sorted(table.values(), key=lambda s: (-s.wait_caused_us, s.rank))
    return Skew(offsets, stragglers, charged)


def _offsets(slots: Slots, ref: int) -> dict[int, float]:
    """Each rank's clock minus the reference rank's: the median difference of their completions, over
    the slots both completed (the same for every rank of a class: computed once)."""
    entry = slots.entry_slot()
    ref_class = next((c for c, rs in enumerate(slots.classes) if ref in rs), -1)
    is_ref = slots.cls == ref_class
    with_ref = np.zeros(len(slots.start), dtype=bool)
    with_ref[entry[is_ref]] = True
    ref_done = np.zeros(len(slots.start), dtype=slots.done.dtype)
    ref_done[entry[is_ref]] = slots.done[is_ref]
    sel = with_ref[entry]
    classes, class_at = first_seen(slots.cls[sel])
    medians = _medians(class_at, slots.done[sel] - ref_done[entry[sel]], len(classes))
    return {r: m for c, m in zip(classes.tolist(), medians) for r in slots.classes[c]}


def _medians(at: np.ndarray, values: np.ndarray, n: int) -> list:
    """Per id of `at` (0..n-1, each used), statistics.median of its values: from one sort of ids
    and values (Python ints: each id's list sorted by statistics)."""
    counts = np.bincount(at, minlength=n)
    if values.dtype == object:
        ordered, bounds = values[stable_order(at)].tolist(), np.cumsum(counts).tolist()
        return [statistics.median(ordered[a:b]) for a, b in zip([0, *bounds[:-1]], bounds)]
    ordered, _ = sorted_by_key(at, values, np.ones(len(values), dtype=np.int64))
    middle = np.cumsum(counts) - counts + counts // 2
    hi, lo = ordered[middle].tolist(), ordered[middle - 1 + counts % 2].tolist()
    return [b if k % 2 else (a + b) / 2 for a, b, k in zip(lo, hi, counts.tolist())]


def _charge(run: Run, table: dict, slots: Slots, counted: np.ndarray, last: np.ndarray, waited: np.ndarray,
            caused: np.ndarray, site: np.ndarray, latest: np.ndarray) -> list[tuple]:
    """The last rank of each slot counted is charged with the waiting its work caused; every member
    with a slot taken part in, and the share of lasts chance would give it (1/members a slot).
    Sums rank by rank (class by class: the same) in slot order (bincount adds in its input's order)."""
    k = np.flatnonzero(counted)
    entry = slots.entry_slot()
    taking = counted[entry]
    classes = slots.cls[taking]
    width = slots.members()[entry[taking]]
    size, n_classes = max(table) + 1, len(slots.classes)
    lasts, took_part = np.bincount(last[k], minlength=size), np.bincount(classes, minlength=n_classes)
    expected = np.bincount(classes, weights=1 / width, minlength=n_classes)
    if caused.dtype == object:  # (times beyond float64's integers: Python's arithmetic)
        wait = dict.fromkeys(table, 0.0)
        for r, c in zip(last[k].tolist(), caused[k].tolist()):
            wait[r] += c
    else:
        wait = np.bincount(last[k], weights=caused[k].astype(float), minlength=size).tolist()
    lasts = lasts.tolist()
    part = {r: (n, e) for rs, n, e in zip(slots.classes, took_part.tolist(), expected.tolist()) for r in rs}
    for r, straggler in table.items():
        straggler.wait_caused_us += wait[r]
        straggler.last_in = lasts[r]
        straggler.slots, straggler.expected_last = part.get(r, (0, 0.0))
    sites = run.sites
    names = slots.names
    return list(zip([names[g] for g in slots.group[k].tolist()], slots.position[k].tolist(), last[k].tolist(),
                    waited[k].tolist(), [sites[s] if s >= 0 else None for s in site[k].tolist()], latest[k].tolist()))
