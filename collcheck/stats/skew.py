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
from array import array
from dataclasses import dataclass, field

import numpy as np

from ..model import Run, Sequences
from ..model.timing import Timings, column, first_seen


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


@dataclass
class _Slots:
    """The slots (group, position) every member completed, flat: per slot its group, position,
    whether it is some member's first collective, and where its entries start; per entry (slot by
    slot, its members in order) the member's rank, issue and completion µs, call site id and work
    before it (µs, where `worked`: the time from its previous collective's completion)."""

    group: list
    position: list
    startup: np.ndarray
    start: np.ndarray
    rank: np.ndarray
    issue: np.ndarray
    done: np.ndarray
    site: np.ndarray
    work: np.ndarray
    worked: np.ndarray

    def entry_slot(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.start)), np.diff(np.append(self.start, len(self.rank))))


def _completed_slots(run: Run, sequences: Sequences, timings: Timings) -> _Slots:
    """Every collective all members completed: each group's members and their slots taken in one
    pass over the groups, their times gathered per rank (numpy)."""
    ranks, members_of, plain = run.ranks, run.group_index.members, sequences.plain
    first = _firsts(run, sequences)
    every_rank = sorted(ranks) == list(range(run.world))  # (a group's recorded members all have logs)
    all_plain = len(plain) == len(ranks)
    blocks: dict[int, list] = {r: [] for r in ranks}  # rank -> [(event indices, first entry, stride)]
    groups, starts, counts, widths = [], [], [], []  # per group with slots: name, start, slots, members
    entries = 0
    for name in run.group_names():
        declared = members_of(name)
        members = declared if every_rank else [r for r in declared if r in ranks]
        if declared and (all_plain or all(r in plain for r in members)):  # (their events there, as they are)
            found, start = [plain[r].get(name) for r in members], 0
        else:
            seqs = sequences.group(name)
            members = members if declared else sorted(seqs.index)
            found, start = [seqs.index.get(r) for r in members], seqs.start
        m = len(members)
        if m < 2 or None in found:
            continue
        n = min(map(len, found))
        if not n:
            continue
        for j, (r, idx) in enumerate(zip(members, found)):
            blocks[r].append((idx if len(idx) == n else idx[:n], entries + j, m))
        groups.append(name)
        starts.append(start)
        counts.append(n)
        widths.append(m)
        entries += n * m
    return _gather(timings, first, blocks, entries, groups, starts, counts, widths)


def _firsts(run: Run, sequences: Sequences) -> dict[int, int]:
    """rank -> its first collective of any group's sequence (a plain rank's: its first event)."""
    first: dict[int, int] = {}
    plain = sequences.plain
    for rank, log in run.ranks.items():
        if rank in plain:
            if len(log):
                first[rank] = 0
            continue
        for name in log.by_group:
            idx = sequences.group(name).index.get(rank)
            if idx and idx[0] < first.get(rank, idx[0] + 1):
                first[rank] = idx[0]
    return first


def _gather(timings: Timings, first: dict, blocks: dict, entries: int, groups: list, starts: list, counts: list,
            widths: list) -> _Slots:
    """The entries' times, rank by rank; the slots some member did not complete left out."""
    wide = any(t.issue.dtype == object or t.done.dtype == object for t in timings.values())
    rank = np.zeros(entries, dtype=np.int64)
    values = {k: np.zeros(entries, dtype=object if wide and k in ("issue", "done", "work") else np.int64)
              for k in ("issue", "done", "site", "work")}
    ok, worked, startup = (np.zeros(entries, dtype=bool) for _ in range(3))
    for r, parts in blocks.items():
        if not parts:
            continue
        t = timings[r]
        lens = [len(ix) for ix, _, _ in parts]
        ix = column(_joined(ix for ix, _, _ in parts))
        step = np.repeat([m for _, _, m in parts], lens)
        at = np.repeat([e for _, e, _ in parts], lens) + step * (np.arange(len(ix)) - np.repeat(np.cumsum(lens) - lens, lens))
        prev = np.maximum(ix - 1, 0)
        rank[at] = r
        values["issue"][at], values["done"][at], values["site"][at] = t.issue[ix], t.done[ix], t.site[ix]
        values["work"][at] = np.maximum(t.issue[ix] - t.done[prev], 0)
        worked[at] = (ix > 0) & t.has_done[prev]
        ok[at] = t.ok[ix] & ~timings.p2p[t.sig[ix]]
        startup[at] = ix == first[r]
    slot_start = np.cumsum([0] + [n * m for n, m in zip(counts, widths)])[:-1]
    # slot k of a group: entries start + k * members on
    group = np.repeat(np.arange(len(groups)), counts)
    within = np.arange(len(group)) - np.repeat(np.cumsum(counts) - counts, counts)
    width = np.repeat(widths, counts)
    first_entry = np.repeat(slot_start, counts) + within * width
    if not len(group):
        empty = np.zeros(0, dtype=np.int64)
        return _Slots([], [], np.zeros(0, dtype=bool), empty, empty, empty, empty, empty, empty, np.zeros(0, dtype=bool))
    complete = np.logical_and.reduceat(ok, first_entry)
    keep = np.repeat(complete, width)
    kept_width = width[complete]
    names = [groups[g] for g in group[complete].tolist()]
    positions = (within + np.repeat(starts, counts))[complete].tolist()
    return _Slots(names, positions, np.logical_or.reduceat(startup, first_entry)[complete],
                  np.cumsum(kept_width) - kept_width, rank[keep], values["issue"][keep], values["done"][keep],
                  values["site"][keep], values["work"][keep], worked[keep])


def _joined(pieces) -> array:
    """Event indices (arrays, ranges) one after the other."""
    out = array("I")
    for ix in pieces:
        out.extend(ix if isinstance(ix, range) or ix.typecode == "I" else iter(ix))
    return out


def arrival_skew(run: Run, timings: Timings) -> Skew:
    """`timings`: model.Timings."""
    slots = _completed_slots(run, Sequences(run), timings)
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
        off = np.array([offsets.get(r, 0.0) for r in slots.rank.tolist()], dtype=object if issue.dtype == object else float)
        arrival = issue - off
        latest = np.maximum.reduceat(arrival, slots.start)
        at_latest = arrival == latest[entry]
        last = np.minimum.reduceat(np.where(at_latest, slots.rank, np.iinfo(np.int64).max), slots.start)
        is_last = slots.rank == last[entry]
        waiting = latest[entry] - arrival
        waited = np.add.reduceat(waiting, slots.start)
        # how much of each member's waiting the last rank's longer work explains (all of it when unknown)
        known = slots.worked & slots.worked[is_last][entry]  # (both works known)
        longer = np.maximum(slots.work[is_last][entry] - slots.work, 0)
        caused = np.where(is_last, 0, np.where(known, np.minimum(waiting, longer), waiting))
        caused = np.add.reduceat(caused, slots.start)
        counted &= waited > 0  # (every member issued it at the same instant: nobody came last)
        charged = _charge(run, table, slots, counted, last, waited, caused, slots.site[is_last], latest)
    stragglers = sorted(table.values(), key=lambda s: (-s.wait_caused_us, s.rank))
    return Skew(offsets, stragglers, charged)


def _offsets(slots: _Slots, ref: int) -> dict[int, float]:
    """Each rank's clock minus the reference rank's: the median difference of their completions, over
    the slots both completed (ranks in the order the slots name them)."""
    entry = slots.entry_slot()
    is_ref = slots.rank == ref
    with_ref = np.zeros(len(slots.start), dtype=bool)
    with_ref[entry[is_ref]] = True
    ref_done = np.zeros(len(slots.start), dtype=slots.done.dtype)
    ref_done[entry[is_ref]] = slots.done[is_ref]
    sel = with_ref[entry]
    ranks, rank_at = first_seen(slots.rank[sel])
    diffs = (slots.done[sel] - ref_done[entry[sel]])[np.argsort(rank_at, kind="stable")].tolist()
    counts = np.bincount(rank_at, minlength=len(ranks)).tolist()
    out, k = {}, 0
    for r, n in zip(ranks.tolist(), counts):
        out[r] = statistics.median(diffs[k:k + n])
        k += n
    return out


def _charge(run: Run, table: dict, slots: _Slots, counted: np.ndarray, last: np.ndarray, waited: np.ndarray,
            caused: np.ndarray, site: np.ndarray, latest: np.ndarray) -> list[tuple]:
    """The last rank of each slot counted is charged with the waiting its work caused; every member
    with a slot taken part in, and the share of lasts chance would give it (1/members a slot).
    Sums rank by rank in slot order (bincount adds in its input's order)."""
    k = np.flatnonzero(counted)
    entry = slots.entry_slot()
    taking = counted[entry]
    members = slots.rank[taking]
    width = np.diff(np.append(slots.start, len(slots.rank)))[entry[taking]]
    size = max(table) + 1
    lasts, took_part = np.bincount(last[k], minlength=size), np.bincount(members, minlength=size)
    expected = np.bincount(members, weights=1 / width, minlength=size)
    if caused.dtype == object:  # (times beyond float64's integers: Python's arithmetic)
        wait = dict.fromkeys(table, 0.0)
        for r, c in zip(last[k].tolist(), caused[k].tolist()):
            wait[r] += c
    else:
        wait = np.bincount(last[k], weights=caused[k].astype(float), minlength=size).tolist()
    lasts, took_part, expected = lasts.tolist(), took_part.tolist(), expected.tolist()
    for r, straggler in table.items():
        straggler.wait_caused_us += wait[r]
        straggler.last_in, straggler.slots, straggler.expected_last = lasts[r], took_part[r], expected[r]
    sites = run.sites
    return list(zip([slots.group[i] for i in k.tolist()], [slots.position[i] for i in k.tolist()], last[k].tolist(),
                    waited[k].tolist(), [sites[s] if s >= 0 else None for s in site[k].tolist()], latest[k].tolist()))
