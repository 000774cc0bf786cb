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

import marshal
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import and_, eq, ge, ne, not_, or_, sub

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
    ops = {name: split_name(name) for name in set(cols.name)}  # name -> (backend, op, meta)
    groups = [g[0] for g in cols.group]
    descs: dict[str, str] = {}
    for name, desc in set(cols.group):
        descs.setdefault(name, desc)
    if len(descs) < len(set(cols.group)):  # a group named with two descriptions: the first one's
        descs = {}
        for name, desc in cols.group:
            descs.setdefault(name, desc)
    first_ns = min(filter(None, cols.created), default=0)  # (the earliest known: 0 is none)
    s = RankSummary(rank, path, head["version"], head["pg_config"], head["pg_status"], head["damaged"], head["damage"],
                    len(cols), frozenset(ops[name][0] for name in ops), first_ns,
                    {name: descs[name] for name in dict.fromkeys(groups)}, {}, set(), {}, {}, False)
    for pg_id, g in set(zip(cols.pg_id, groups)):
        s.pg_ids.setdefault(pg_id, set()).add(g)
    last = {pg: st["last_completed_collective"] for pg, st in head["pg_status"].items()}
    lasts = list(map(last.get, cols.pg_id))
    counted = (list(map(ge, lasts, cols.seq)) if None not in lasts  # (the usual dump: every group counted)
               else [n is not None and seq <= n for n, seq in zip(lasts, cols.seq)])
    _sequences(s, cols, groups, counted, ops)
    order = sorted(range(len(cols)), key=cols.record_id.__getitem__)
    s.wrapped = bool(order) and cols.record_id[order[0]] > 0
    _blocks(s, cols, order, ops, groups, counted)
    return s


def _sequences(s: RankSummary, cols: Columns, groups: list, counted: list, ops: dict) -> None:
    """Per group: its collectives' largest sequence number, whether one is 0, and the gloo ones
    its counters say completed."""
    p2p, seqs = cols.p2p, cols.seq
    collectives = range(len(seqs)) if True not in p2p else [i for i, x in enumerate(p2p) if not x]
    one = len(set(groups)) == 1  # (the usual case: no loop over the entries)
    by_group: dict[str, list] = {}
    if one and collectives:
        by_group[groups[0]] = seqs if collectives.__class__ is range else [seqs[i] for i in collectives]
    for i in () if one else collectives:
        by_group.setdefault(groups[i], []).append(seqs[i])
    s.max_seq = {g: max(v) for g, v in by_group.items()}
    s.seq0 = {g for g, v in by_group.items() if 0 in v}
    joins = {name for name, (backend, op, _) in ops.items() if backend == "gloo" and op in SYMMETRIC}
    if joins:  # (gloo only)
        joined: dict[str, set] = {}
        names = cols.name
        joining = map(and_, counted, map(joins.__contains__, names))
        counted_joins = [i for i in compress(range(len(names)), joining) if not p2p[i]]
        if one:
            joined[groups[0]] = set(map(seqs.__getitem__, counted_joins))
        else:
            for i in counted_joins:
                joined.setdefault(groups[i], set()).add(seqs[i])
        s.joined = {g: _runs(v) for g, v in joined.items() if v}


def _runs(numbers: set) -> list[tuple[int, int]]:
    """Sorted numbers as runs (first, last) of consecutive ones: a few per group, not thousands
    (found with passes in C: where the step from one number to the next is not 1)."""
    if not numbers:
        return []
    v = sorted(numbers)
    breaks = list(compress(range(1, len(v)), map(ne, map(sub, v[1:], v), repeat(1))))
    firsts = [0, *breaks]
    lasts = [b - 1 for b in breaks] + [len(v) - 1]
    return list(zip(map(v.__getitem__, firsts), map(v.__getitem__, lasts)))


def _blocks(s: RankSummary, cols: Columns, order: list, ops: dict, groups: list, counted: list) -> None:
    """The collectives of the log, in order: each one's signature rolled into its channel's hash,
    the ones not completed listed."""
    parts = _tensor_keys(cols, ops)
    wires = {name: FR_OPS.get(op, (op, op, "in"))[0] for name, (_, op, _) in ops.items()}
    blocks = _block_bounds(cols, order, ops)
    if blocks is None:
        _one_entry_each(s, cols, order, (ops, groups, counted, parts, wires))
        return
    p2p, seqs, names, states = cols.p2p, cols.seq, cols.name, cols.state
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
            sig = sigs[key] = block_signature(wire, tuple(map(_part, key[1:])))
        group = groups[first]
        if p2p[first]:
            _, op, meta = ops[name]
            st = channels.setdefault((group, lf.seq_key(0, wire, peer_of(op, meta))), [0, 0, True])
            st[0] += 1
        else:
            st = channels.setdefault((group, 0), [0, 0, False])
            st[0] = seqs[first]
        st[1] = (st[1] * MULT + sig) & MASK  # (checkpoint.roll)
        if states[first] != "completed" and (p2p[first] or not counted[first]):
            s.not_done.append((eid, OPEN if p2p[first] else UNDECIDED, group, seqs[first], ops[name][0] == "gloo"))


def _one_entry_each(s: RankSummary, cols: Columns, order: list, per_entry: tuple) -> None:
    """_blocks where every collective is one entry and none is P2P (the usual dump): the
    signatures of all at once, then each group's rolled."""
    ops, groups, counted, parts, wires = per_entry
    in_order = _identity(order)  # (the usual dump: its entries are in record order)

    def ordered(values: list) -> list:
        return values if in_order else list(map(values.__getitem__, order))

    keys = list(zip(map(wires.__getitem__, ordered(cols.name)), ordered(parts)))
    sig_of = dict.fromkeys(keys)
    for key in sig_of:
        sig_of[key] = block_signature(key[0], (_part(key[1]),))
    sigs = list(map(sig_of.__getitem__, keys))
    group_of = ordered(groups)
    s.blocks = len(order)
    by_group: dict[str, list] = {}
    if len(set(group_of)) == 1:
        by_group[group_of[0]] = sigs
    else:
        for g, sig in zip(group_of, sigs):
            by_group.setdefault(g, []).append(sig)
    last = dict(zip(group_of, ordered(cols.seq)))  # each group's last collective's number
    for g, group_sigs in by_group.items():
        h = 0
        for sig in group_sigs:
            h = (h * MULT + sig) & MASK  # (checkpoint.roll)
        s.channels[(g, 0)] = [last[g], h, False]
    states, seqs = cols.state, cols.seq
    done = map(or_, map(eq, ordered(states), repeat("completed")), ordered(counted))
    for eid in compress(range(len(order)), map(not_, done)):
        i = order[eid]
        s.not_done.append((eid, UNDECIDED, groups[i], seqs[i], ops[cols.name[i]][0] == "gloo"))


def _identity(order: list) -> bool:
    return order == list(range(len(order)))


def _block_bounds(cols: Columns, order: list, ops: dict) -> list | None:
    """entries.block_bounds of the entries in record order; None when every collective is one
    entry and none is P2P (found without a loop over them)."""
    group, seq = cols.group, cols.seq
    if True not in cols.p2p and not any(ops[name][1] == "coalesced" for name in ops):
        keys = list(zip(map(group.__getitem__, order), map(seq.__getitem__, order)))
        if not any(map(tuple.__eq__, keys, keys[1:])):  # no two in a row of one group and number
            return None
    return block_bounds([(ops[cols.name[i]][1], cols.p2p[i], group[i], seq[i]) for i in order])


def _tensor_keys(cols: Columns, ops: dict) -> list:
    """Per entry: a key of the tensors its op has ranks agree on (FR_OPS: inputs or outputs), or
    None for an op without: (its sizes as marshal bytes, its dtype names as a tuple). Bytes hash
    once and compare in C, where nested tuples of every entry would be built and hashed again at
    each lookup; the format (version 2: no references) is a function of the value and its types,
    so that equal sizes give one key (lists and tuples two, of one signature). `_part` undoes it."""
    side = {name: FR_OPS.get(op, (None, None, "in"))[2] for name, (_, op, _) in ops.items()}
    out = list(zip(map(marshal.dumps, cols.in_sizes, repeat(2)), map(tuple, cols.in_dtypes)))
    if set(side.values()) != {"in"}:
        for i, name in enumerate(cols.name):
            which = side[name]
            if which is None:
                out[i] = None
            elif which == "out":
                out[i] = (marshal.dumps(cols.out_sizes[i], 2), tuple(cols.out_dtypes[i]))
    return out


def _part(key) -> tuple:
    """(sizes, dtypes) as tuples of a `_tensor_keys` key, () for None (marshal bytes this process
    made of checked sizes: nothing else is ever loaded)."""
    return () if key is None else (tuple(map(tuple, marshal.loads(key[0]))), key[1])


def block_signature(wire: str, parts: tuple) -> int:
    """The checkpoint signature (logfile/checkpoint.signature) of a collective of `parts` (each
    entry's (sizes, dtypes), or () for an op without tensors), as RankWriter writes it."""
    tensors = ()
    for part in parts:
        if part:
            tensors += tensors_from(*part)
    return signature(wire, tensors if tensors and wire != "barrier" else None, None, None, 0)
