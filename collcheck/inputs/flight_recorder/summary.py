"""What one rank's dump adds to the run's facts, and what its converted log will say about itself.

A worker process reads a dump and sends back only this (a few KiB): its group table and counters,
what its entries say about the run (groups, sequence numbers, times, backends, gloo collectives
completed by the counters), and per group and P2P channel the count and rolling hash of the
signatures its log's collectives will have (logfile/checkpoint.py), with the collectives not
completed. From these, convert.py knows the run's facts without holding any dump, and which ranks
are of one kind: those get the log of the first of their kind, with their own header.

Everything here is computed from the entries' columns (columns.py), in record order, blocks as
entries.blocks_of forms them: the same collectives, in the same order, as rank_log.RankWriter
writes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...logfile import format as lf
from ...logfile.checkpoint import MASK, MULT, signature
from .columns import Columns
from .entries import (
    COALESCED,
    FR_OPS,
    SYMMETRIC,
    block_bounds,
    peer_of,
    split_name,
    tensors_from,
)

OPEN, UNDECIDED = 0, 1  # a collective not completed: for certain (P2P), or unless a peer counted it (joined)


@dataclass
class RankSummary:
    """One rank's dump, summarized (see the module's docstring)."""

    rank: int
    path: str
    version: str
    pg_config: dict  # schema.groups_of
    pg_status: dict  # schema.counters_of
    damaged: int
    damage: str | None
    entries: int
    backends: frozenset  # of its entries ("" for a name without one)
    first_ns: int  # the earliest positive time_created_ns (0: none)
    groups: dict  # group name -> description, in the order its entries first name them
    pg_ids: dict  # pg_id -> the group names its entries give it
    seq0: set  # groups with a collective numbered 0
    max_seq: dict  # group -> its largest collective_seq_id (collectives)
    joined: dict  # group -> runs (first, last) of the sequence numbers of gloo collectives its counters
    # say completed (SYMMETRIC: complete only once every member joined)
    wrapped: bool  # the ring buffer wrapped: entries before the first kept one went
    blocks: int = 0  # collectives its log will have (coalesced entries joined)
    # (group, seq_key without the group) -> [last collective_seq_id (a group's) or count (a P2P
    # channel's), rolling hash of the signatures, P2P]
    channels: dict = field(default_factory=dict)
    # collectives not completed by their state or their group's counters: (event id, OPEN or
    # UNDECIDED, group, collective_seq_id, gloo)
    not_done: list = field(default_factory=list)


def summarize(rank: int, path: str, head: dict, cols: Columns) -> RankSummary:
    """The summary of a dump whose header and tables are `head` (schema.dump_head) and whose good
    entries are `cols`."""
    texts = cols.texts
    ops = {i: split_name(texts[i]) for i in _distinct(cols.name)}  # name id -> (backend, op, meta)
    groups, firsts = _firsts(cols.group)  # groups in the order their entries first name them
    created = cols.created[cols.created > 0]
    s = RankSummary(rank, path, head["version"], head["pg_config"], head["pg_status"], head["damaged"], head["damage"],
                    len(cols), frozenset(op[0] for op in ops.values()), int(created.min()) if len(created) else 0,
                    {texts[g]: texts[cols.desc[i]] for g, i in zip(groups, firsts)}, {}, set(), {}, {}, False)
    for key in _distinct((cols.pg_id.astype(np.int64) + 1) << 32 | cols.group):
        pg, g = (key >> 32) - 1, key & 0xFFFFFFFF
        s.pg_ids.setdefault(None if pg < 0 else texts[pg], set()).add(texts[g])
    counted = _counted(head, cols)
    _sequences(s, cols, counted, ops)
    order = np.argsort(cols.record_id, kind="stable")
    s.wrapped = bool(len(order)) and int(cols.record_id[order[0]]) > 0
    _blocks(s, cols, order, ops, counted)
    return s


def _counted(head: dict, cols: Columns) -> np.ndarray:
    """Per entry: whether its group's counters say it completed (its number at most the last
    completed; a group without counters: no)."""
    last = {pg: st["last_completed_collective"] for pg, st in head["pg_status"].items()}
    ids = _distinct(cols.pg_id)
    known = {i: last.get(cols.texts[i]) if i >= 0 else None for i in ids}
    table = np.array([-2 if known[i] is None else known[i] for i in ids], np.int64)  # (-2: none, below any)
    return cols.seq <= table[np.searchsorted(ids, cols.pg_id)] if ids else np.zeros(0, bool)


def _sequences(s: RankSummary, cols: Columns, counted: np.ndarray, ops: dict) -> None:
    """Per group: its collectives' largest sequence number, whether one is 0, and the gloo ones
    its counters say completed."""
    texts = cols.texts
    collective = ~cols.p2p
    groups, seqs = cols.group[collective], cols.seq[collective]
    for g in _firsts(groups)[0]:
        mine = seqs[groups == g]
        s.max_seq[texts[g]] = int(mine.max())
        if (mine == 0).any():
            s.seq0.add(texts[g])
    joins = [i for i, (backend, op, _) in ops.items() if backend == "gloo" and op in SYMMETRIC]
    if joins:  # (gloo only)
        joining = counted & np.isin(cols.name, joins) & collective
        for g in _distinct(cols.group[joining]):
            s.joined[texts[g]] = _runs(cols.seq[joining & (cols.group == g)])


def _runs(numbers: np.ndarray) -> list[tuple[int, int]]:
    """The distinct numbers as runs (first, last) of consecutive ones, in order: a few per group,
    not thousands."""
    if not len(numbers):
        return []
    v = np.sort(numbers)
    v = v[np.concatenate(([True], v[1:] != v[:-1]))]
    breaks = np.flatnonzero(np.diff(v) != 1) + 1
    firsts = np.concatenate(([0], breaks))
    lasts = np.concatenate((breaks - 1, [len(v) - 1]))
    return list(zip(v[firsts].tolist(), v[lasts].tolist()))


def _blocks(s: RankSummary, cols: Columns, order: np.ndarray, ops: dict, counted: np.ndarray) -> None:
    """The collectives of the log, in order: each one's signature rolled into its channel's hash,
    the ones not completed listed."""
    parts = _parts(cols, ops)
    wires = {i: FR_OPS.get(op, (op, op, "in"))[0] for i, (_, op, _) in ops.items()}
    if _one_entry_each(cols, order, ops):
        _each_entry(s, cols, order, (ops, counted, parts, wires))
        return
    texts = cols.texts
    names, groups, seqs = cols.name.tolist(), cols.group.tolist(), cols.seq.tolist()
    p2p, parts, counted = cols.p2p.tolist(), parts.tolist(), counted.tolist()
    order = order.tolist()
    pairs = _group_keys(cols).tolist()  # (name and description: what block_bounds compares)
    blocks = block_bounds([(ops[names[i]][1], p2p[i], pairs[i], seqs[i]) for i in order])
    completed = _id(texts, "completed")
    states = cols.state.tolist()
    s.blocks = len(blocks)
    sigs: dict = {}
    channels = s.channels
    for eid, bounds in enumerate(blocks):
        first = order[bounds[0]]
        name, wire = names[first], wires[names[first]]
        if len(bounds) > 1 and wire in COALESCED:
            wire = COALESCED[wire][0]
        key = (wire, *(parts[order[b]] for b in bounds))
        sig = sigs.get(key)
        if sig is None:
            sig = sigs[key] = block_signature(wire, tuple(_part(cols, p) for p in key[1:]))
        group = texts[groups[first]]
        if p2p[first]:
            _, op, meta = ops[name]
            st = channels.setdefault((group, lf.seq_key(0, wire, peer_of(op, meta))), [0, 0, True])
            st[0] += 1
        else:
            st = channels.setdefault((group, 0), [0, 0, False])
            st[0] = seqs[first]
        st[1] = (st[1] * MULT + sig) & MASK  # (checkpoint.roll)
        if states[first] != completed and (p2p[first] or not counted[first]):
            s.not_done.append((eid, OPEN if p2p[first] else UNDECIDED, group, seqs[first], ops[name][0] == "gloo"))


def _each_entry(s: RankSummary, cols: Columns, order: np.ndarray, per_entry: tuple) -> None:
    """_blocks where every collective is one entry and none is P2P (the usual dump): a signature
    per distinct (name, tensors), then each group's rolled."""
    ops, counted, parts, wires = per_entry
    texts = cols.texts
    pairs = (cols.name.astype(np.int64) << 32 | (parts.astype(np.int64) + 1))[order]
    distinct, which = np.unique(pairs, return_inverse=True)
    table = [block_signature(wires[p >> 32], (_part(cols, (p & 0xFFFFFFFF) - 1),)) for p in distinct.tolist()]
    sigs = np.array(table, np.uint64)[which.reshape(-1)]
    group_of = cols.group[order]
    seq_of = cols.seq[order]
    s.blocks = len(order)
    for g in _firsts(group_of)[0]:
        mine = np.flatnonzero(group_of == g)
        s.channels[(texts[g], 0)] = [int(seq_of[mine[-1]]), rolled(sigs[mine]), False]
    done = (cols.state[order] == _id(texts, "completed")) | counted[order]
    for eid in np.flatnonzero(~done).tolist():
        i = int(order[eid])
        s.not_done.append((eid, UNDECIDED, texts[cols.group[i]], int(cols.seq[i]), ops[int(cols.name[i])][0] == "gloo"))


def rolled(sigs: np.ndarray) -> int:
    """checkpoint.roll over `sigs` (uint64) from 0: the sum of each times MULT to the power of
    those after it, mod 2^64 (numpy's uint64 products and sums wrap mod 2^64)."""
    if not len(sigs):
        return 0
    powers = np.full(len(sigs), MULT, np.uint64)
    powers[0] = 1
    return int((sigs * np.cumprod(powers)[::-1]).sum(dtype=np.uint64)) & MASK


def _id(texts: list, text: str) -> int:
    """The id of `text` (-2 where it is not there: no id is)."""
    try:
        return texts.index(text)
    except ValueError:
        return -2


def _one_entry_each(cols: Columns, order: np.ndarray, ops: dict) -> bool:
    """Whether every collective is one entry and none is P2P: no coalescing marker, and no two
    entries in a row (record order) of one group and number."""
    if cols.p2p.any() or any(op[1] == "coalesced" for op in ops.values()):
        return False
    g, seq = _group_keys(cols)[order], cols.seq[order]
    return not ((g[1:] == g[:-1]) & (seq[1:] == seq[:-1])).any()


def _group_keys(cols: Columns) -> np.ndarray:
    """Per entry: its group's name and description as one number."""
    return cols.group.astype(np.int64) << 32 | cols.desc.astype(np.int64)


def _distinct(ids: np.ndarray) -> list[int]:
    """The distinct values of `ids` (small ids, -1 for none; or any int64 keys), in order."""
    if len(ids) and ids.min() >= -1 and ids.max() < 4 * len(ids) + 1024:  # (ids: counted, not sorted)
        return (np.flatnonzero(np.bincount(ids + 1)) - 1).tolist()
    return np.unique(ids).tolist()


def _firsts(ids: np.ndarray) -> tuple[list[int], list[int]]:
    """The distinct ids (>= 0) in the order they first come, and the index of each one's first."""
    if not len(ids):
        return [], []
    first = np.full(int(ids.max()) + 1, len(ids))
    first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1)  # (the last write wins: the first index)
    distinct = np.flatnonzero(first < len(ids))
    order = np.argsort(first[distinct], kind="stable")
    return distinct[order].tolist(), first[distinct][order].tolist()


def _parts(cols: Columns, ops: dict) -> np.ndarray:
    """Per entry: the side id of the tensors its op has ranks agree on (FR_OPS: inputs or
    outputs), or -1 for an op without."""
    side = {i: FR_OPS.get(op, (None, None, "in"))[2] for i, (_, op, _) in ops.items()}
    which = set(side.values())
    if which == {"in"}:
        return cols.in_side
    parts = np.full(len(cols), -1, np.int32)
    for i, where in side.items():
        mine = cols.name == i
        if where is not None:
            parts[mine] = (cols.in_side if where == "in" else cols.out_side)[mine]
    return parts


def _part(cols: Columns, side: int) -> tuple:
    """(sizes, dtypes) of a side id, () for -1 (an op without tensors)."""
    return () if side < 0 else cols.sides[side]


def block_signature(wire: str, parts: tuple) -> int:
    """The checkpoint signature (logfile/checkpoint.signature) of a collective of `parts` (each
    entry's (sizes, dtypes), or () for an op without tensors), as RankWriter writes it."""
    tensors = ()
    for part in parts:
        if part:
            tensors += tensors_from(*part)
    return signature(wire, tensors if tensors and wire != "barrier" else None, None, None, 0)
