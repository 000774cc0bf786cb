"""The groups whose members agree on everything, found for all the groups at once.

A group whose members issued the same collectives in the same order, reached by the same call
chains, holds nothing for the matcher (align.align_group) or the chain comparison
(chains.chain_findings) to report: each returns at its first check. A run of 100,000 such groups
spent most of its analysis in those checks, group by group. Here each kind of plain rank's
signatures and call chain keys are laid out by group once (model.Sequences.plain: a plain rank's
sequence in a group is its events there), and every member of every group is compared with the
group's first member in one pass (numpy). The groups that differ, whose holders are not exactly
their members, or whose ranks are not plain go the usual way.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from ..model import Run, Sequences


@dataclass
class _Layout:
    """A kind of plain rank's signature ids and call chains (run-wide ids, as chain_findings
    compares them), group after group, from `base` in the run's joined columns; `start`: where
    each group's begin (from `base`), `length`: how many."""

    base: int
    start: dict
    length: dict
    sig: np.ndarray
    chain: np.ndarray


def agreeing(run: Run, sequences: Sequences) -> dict[str, int]:
    """group -> its collectives per member, for every group no rank issued anything on, and every
    group whose ranks are plain, whose ranks with events in it are exactly its members (its
    recorded members with logs, else those ranks), and whose members issued what the first of
    them did, in the same order, from the same call chains: align_group and chain_findings would
    find nothing there."""
    if sequences.unlocated:  # (every group's sequences then say which ranks are open)
        return {}
    layouts = _layouts(run, sequences.plain)
    if not layouts:
        return {}
    out: dict[str, int] = {}
    pairs: list[tuple] = []  # (group, first member's start, the other's start, length) to compare
    holders, members_of, ranks = sequences.holders, run.group_index.members, run.ranks
    every_rank = sorted(ranks) == list(range(run.world))  # (recorded members are all ranks with logs)
    for name in run.group_names():
        held = holders.get(name, ())
        if not held:  # (no member issued anything there: nothing differs)
            out[name] = 0
            continue
        declared = members_of(name)
        members = sorted(declared if every_rank else [r for r in declared if r in ranks]) if declared else sorted(held)
        if len(held) != len(members) or sorted(held) != members or not all([r in layouts for r in held]):
            continue
        first = layouts[members[0]]
        n = first.length[name]
        out[name] = n
        for r in members[1:]:
            other = layouts[r]
            if other is first:  # (ranks of a kind: the same columns)
                continue
            if other.length[name] != n:
                del out[name]
                break
            pairs.append((name, first.base + first.start[name], other.base + other.start[name], n))
    for name in _differing(layouts, pairs):
        out.pop(name, None)
    return out


def _layouts(run: Run, plain: dict) -> dict[int, _Layout]:
    """Each plain rank's layout (ranks of a kind share one)."""
    kinds: dict[tuple, _Layout] = {}
    out: dict[int, _Layout] = {}
    base = 0
    for rank, by_group in plain.items():
        log = run.ranks[rank]
        key = (id(log.sig), id(by_group), id(log.chain), id(log.chain_sites))
        layout = kinds.get(key)
        if layout is None:
            order = array("I")
            for idx in by_group.values():
                order.extend(idx)
            at = np.frombuffer(order, np.uint32) if order else np.zeros(0, np.uint32)
            lengths = [len(idx) for idx in by_group.values()]
            sig = np.frombuffer(log.sig, np.uint32) if len(log.sig) else np.zeros(0, np.uint32)
            chains = log.chains_of(range(len(log)), len(log))  # (what chain_findings compares)
            chain = np.frombuffer(chains, np.uint32) if len(chains) else np.zeros(0, np.uint32)
            layout = kinds[key] = _Layout(base, dict(zip(by_group, accumulate(lengths, initial=0))),
                                          dict(zip(by_group, lengths)), sig[at], chain[at])
            base += len(order)
        out[rank] = layout
    return out


def _differing(layouts: dict[int, _Layout], pairs: list[tuple]) -> set[str]:
    """The groups of `pairs` where the two members' signatures or chain keys differ somewhere."""
    pairs = [p for p in pairs if p[3]]
    if not pairs:
        return set()
    kinds = list({id(layout): layout for layout in layouts.values()}.values())
    sig = np.concatenate([layout.sig for layout in sorted(kinds, key=lambda k: k.base)])
    chain = np.concatenate([layout.chain for layout in sorted(kinds, key=lambda k: k.base)])
    a, b, n = (np.array([p[k] for p in pairs], dtype=np.int64) for k in (1, 2, 3))
    step = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    left, right = np.repeat(a, n) + step, np.repeat(b, n) + step
    same = (sig[left] == sig[right]) & (chain[left] == chain[right])
    agree = np.logical_and.reduceat(same, np.cumsum(n) - n)
    return {pairs[k][0] for k in np.flatnonzero(~agree).tolist()}
