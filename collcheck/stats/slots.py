"""The slots (group, position) every member completed, as flat columns for skew.py: per slot, one
entry per class of its members, the ranks whose columns are equal (a fold of model.Timings, that
start at the same collective and stand at the same positions of each group) counted once with
their number as the entry's weight. A group of 4,096 ranks of one kind is one entry a slot."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from ..model import Run, Sequences
from ..model.timing import Timings, column


@dataclass
class Slots:
    """The slots every member completed, flat: per slot its group (in `names`), position, whether it is some
    member's first collective, and where its entries start; per entry (slot by slot, its classes
    in the order of their first member) the class (`classes`: its ranks), its lowest member, how
    many members it stands for, their issue and completion µs, call site id and work before it (µs,
    where `worked`: the time from its previous collective's completion)."""

    group: np.ndarray  # index in `names`
    names: list
    position: np.ndarray
    startup: np.ndarray
    start: np.ndarray
    cls: np.ndarray
    rank: np.ndarray
    weight: np.ndarray
    issue: np.ndarray
    done: np.ndarray
    site: np.ndarray
    work: np.ndarray
    worked: np.ndarray
    classes: list  # class -> its ranks, ascending

    _entry: np.ndarray | None = field(default=None, init=False, repr=False)

    def entry_slot(self) -> np.ndarray:
        """Per entry, its slot (computed once)."""
        if self._entry is None:
            self._entry = np.repeat(np.arange(len(self.start)), np.diff(np.append(self.start, len(self.rank))))
        return self._entry

    def members(self) -> np.ndarray:
        """Per slot, its members (the entries' weights added)."""
        return np.add.reduceat(self.weight, self.start) if len(self.start) else np.zeros(0, np.int64)


def completed_slots(run: Run, sequences: Sequences, timings: Timings) -> Slots:
    """Every collective all members completed: each group's members and their slots taken in one
    pass over the groups, their times gathered per class (numpy). Ranks of one fold are one class
    unless a group finds them at other positions (then each rank is one)."""
    first = _firsts(run, sequences)
    key = {r: (timings.fold_of[r], first.get(r)) for r in run.ranks}
    found = _group_members(run, sequences, key)
    if found is None:  # (a fold's ranks stand apart somewhere: no class of several ranks)
        key = {r: (r,) for r in run.ranks}
        found = _group_members(run, sequences, key)
    classes: dict[tuple, list[int]] = {}
    for r in sorted(run.ranks):
        classes.setdefault(key[r], []).append(r)
    index = {k: c for c, k in enumerate(classes)}
    blocks: dict[int, list] = {c: [] for c in range(len(classes))}  # class -> [(event indices, first entry, stride)]
    groups, starts, counts, widths = [], [], [], []  # per group with slots: name, start, slots, entries a slot
    entries = 0
    for name, start, units in found:
        n = min(len(idx) for _, idx in units)
        if not n:
            continue
        m = len(units)
        for j, (k, idx) in enumerate(units):
            blocks[index[k]].append((idx if len(idx) == n else idx[:n], entries + j, m))
        groups.append(name)
        starts.append(start)
        counts.append(n)
        widths.append(m)
        entries += n * m
    return _gather(timings, first, list(classes.values()), blocks, entries, (groups, starts, counts, widths))


def _group_members(run: Run, sequences: Sequences, key: dict) -> list | None:
    """Per group with at least two members, all found: (name, its first position, [(class key,
    event indices)] in the order of each class's first member); None when a class's ranks are not
    all found at the same events of every group they are in."""
    ranks, members_of, plain = run.ranks, run.group_index.members, sequences.plain
    every_rank = sorted(ranks) == list(range(run.world))  # (a group's recorded members all have logs)
    all_plain = len(plain) == len(ranks)
    size: dict[tuple, int] = {}
    for k in key.values():
        size[k] = size.get(k, 0) + 1
    out = []
    for name in run.group_names():
        declared = members_of(name)
        members = declared if every_rank else [r for r in declared if r in ranks]
        if declared and (all_plain or all(r in plain for r in members)):  # (their events there, as they are)
            found, start = [plain[r].get(name) for r in members], 0
        else:
            seqs = sequences.group(name)
            members = members if declared else sorted(seqs.index)
            found, start = [seqs.index.get(r) for r in members], seqs.start
        if len(members) < 2 or None in found:
            continue
        units: dict[tuple, list] = {}
        for r, idx in zip(members, found):
            k = key[r]
            unit = units.get(k)
            if unit is None:
                units[k] = [idx, 1]
            elif unit[0] is not idx and unit[0] != idx:
                return None
            else:
                unit[1] += 1
        if any(n != size[k] for k, (_, n) in units.items()):
            return None  # (a class only partly in the group)
        out.append((name, start, [(k, idx) for k, (idx, _) in units.items()]))
    return out


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


def _gather(timings: Timings, first: dict, classes: list, blocks: dict, entries: int, shape: tuple) -> Slots:
    """The entries' times, class by class; the slots some member did not complete left out."""
    groups, starts, counts, widths = shape
    wide = any(t.issue.dtype == object or t.done.dtype == object for t in timings.values())
    cls = np.zeros(entries, dtype=np.int64)
    values = {k: np.zeros(entries, dtype=object if wide and k in ("issue", "done", "work") else np.int64)
              for k in ("issue", "done", "site", "work")}
    flags = {k: np.zeros(entries, dtype=bool) for k in ("ok", "worked", "startup")}
    for c, parts in blocks.items():
        if parts:
            src, at = _places(parts)
            cls[at] = c
            for name, col in _columns(timings, timings[classes[c][0]], first.get(classes[c][0])).items():
                (values[name] if name in values else flags[name])[at] = col[src]
    ok, worked, startup = flags["ok"], flags["worked"], flags["startup"]
    slot_start = np.cumsum([0] + [n * m for n, m in zip(counts, widths)])[:-1]
    # slot k of a group: entries start + k * classes on
    group = np.repeat(np.arange(len(groups)), counts)
    within = np.arange(len(group)) - np.repeat(np.cumsum(counts) - counts, counts)
    width = np.repeat(widths, counts)
    first_entry = np.repeat(slot_start, counts) + within * width
    if not len(group):
        empty = np.zeros(0, dtype=np.int64)
        return Slots(empty, [], empty, np.zeros(0, dtype=bool), empty, empty, empty, empty, empty, empty, empty,
                     empty, np.zeros(0, dtype=bool), classes)
    complete = np.logical_and.reduceat(ok, first_entry)
    if complete.all():  # (nothing to leave out: the columns as they are)
        slot, entry = (lambda a: a), (lambda a: a)
    else:
        keep = np.repeat(complete, width)
        slot, entry = (lambda a: a[complete]), (lambda a: a[keep])
    kept_width = slot(width)
    lowest = np.array([rs[0] for rs in classes], dtype=np.int64)
    weight = np.array([len(rs) for rs in classes], dtype=np.int64)
    kept = entry(cls)
    return Slots(slot(group), groups, slot(within + np.repeat(starts, counts)),
                 slot(np.logical_or.reduceat(startup, first_entry)), np.cumsum(kept_width) - kept_width, kept,
                 lowest[kept], weight[kept], entry(values["issue"]), entry(values["done"]), entry(values["site"]),
                 entry(values["work"]), entry(worked), classes)


def _places(parts: list) -> tuple:
    """A class's events in its entries: (where they are in its log, where their entries are), each a
    slice where it can be (one range of events; one group's entries, every `stride`-th), else an
    index array."""
    if len(parts) == 1:
        ix, e, m = parts[0]
        at = slice(e, e + m * len(ix), m)
        if isinstance(ix, range) and ix.step == 1:
            return slice(ix.start, ix.stop), at
        return column(ix), at
    lens = [len(ix) for ix, _, _ in parts]
    ix = column(_joined(ix for ix, _, _ in parts))
    step = np.repeat([m for _, _, m in parts], lens)
    at = np.repeat([e for _, e, _ in parts], lens) + step * (np.arange(len(ix)) - np.repeat(np.cumsum(lens) - lens, lens))
    return ix, at


def _columns(timings: Timings, t, first: int | None) -> dict[str, np.ndarray]:
    """Per event of a rank's log: what its entry holds (its times, site, the work before it and
    whether that is known, whether it completed and is not P2P, whether it is the rank's first
    collective)."""
    startup = np.zeros(len(t), dtype=bool)
    if first is not None:
        startup[first] = True
    worked = np.concatenate([np.zeros(min(len(t), 1), dtype=bool), t.has_done[:-1]])
    before = np.concatenate([t.done[:1], t.done[:-1]])  # (the first event's own: as its work, 0 or more)
    return {"issue": t.issue, "done": t.done, "site": t.site, "work": np.maximum(t.issue - before, 0),
            "worked": worked, "ok": t.ok & ~timings.p2p[t.sig], "startup": startup}


def _joined(pieces) -> array:
    """Event indices (arrays, ranges) one after the other."""
    out = array("I")
    for ix in pieces:
        out.extend(ix if isinstance(ix, range) or ix.typecode == "I" else iter(ix))
    return out
