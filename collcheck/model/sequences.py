"""The orders in which ranks are lined up: a group's collectives and a channel's messages.

Slot k of a group is the k-th collective each member issued on it, point-to-point ops left
out (a pipeline stage's sends are not slots of the group's collectives). Message k of a
channel (group, src, dst) is the src's k-th send to dst and the dst's k-th recv from src,
NCCL's in-order pairing. The matcher, the wait-for graph and the TUI all read them from here,
so "slot k" and "message k" mean the same everywhere.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from ..logfile.ops import P2P_OPS
from .run import Run


class GroupSequences:
    """Each member's collective (non-P2P) event indices in one group, and their signature ids.

    A rank whose log lost collectives of the group (damage) keeps only the slots before the
    first loss and is `open`: what it issued after is not known, so it is never taken to have
    stopped there."""

    def __init__(self, run: Run, name: str, p2p_ids: frozenset[int], cuts: dict[int, "_Cuts"],
                 holders: list[int] | None = None, dropped: list[int] | None = None):
        """`holders`: the ranks with events in the group, `dropped`: those whose capped logs lost
        their oldest segments (Sequences knows both for every group; None: every rank)."""
        self.run = run
        self.name = name
        self.index: dict[int, object] = {}  # rank -> event indices (a range when nothing is left out)
        self.seq: dict[int, array] = {}  # rank -> signature ids, in slot order
        self.open: set[int] = set()  # ranks whose sequence is cut where their log lost some of it
        for rank, cut in cuts.items():
            if cut.unlocated and name not in run.ranks[rank].by_group:
                self.open.add(rank)  # it may have issued some on the group: they were lost
        shared: dict[tuple, tuple] = {}  # (signature column, index) -> (index, sequence): ranks of one kind
        for rank in run.ranks if holders is None else holders:
            log = run.ranks[rank]
            idx = log.by_group.get(name)
            if idx is None:
                continue
            k = cuts[rank].groups.get(name) if rank in cuts else None
            if k is not None:
                idx, seq = self._sequence(log.sig, idx, p2p_ids)
                idx = idx[:k]
                self.open.add(rank)
                seq = array("I", (log.sig[i] for i in idx))
            else:
                key = (id(log.sig), id(idx))
                if key not in shared:
                    shared[key] = self._sequence(log.sig, idx, p2p_ids)
                idx, seq = shared[key]
            self.index[rank], self.seq[rank] = idx, seq
        self.start = self._align_starts(run, name, run.ranks if dropped is None else dropped)
        self._members: list[int] | None = None

    @classmethod
    def plain(cls, run: Run, name: str, index: dict, seq: dict) -> "GroupSequences":
        """The sequences of a group whose ranks lost nothing and issued no P2P op (Sequences makes
        them all at once): each rank's events in the group, as they are."""
        self = cls.__new__(cls)
        self.run, self.name, self.index, self.seq, self.open, self.start, self._members = run, name, index, seq, set(), 0, None
        return self

    @property
    def members(self) -> list[int]:
        """The members compared: those of the group's recorded members that have logs (else the
        ranks that issued on it), sorted."""
        if self._members is None:
            declared = self.run.group_members(self.name)
            ranks = self.run.ranks
            self._members = sorted(r for r in declared if r in ranks) if declared else sorted(self.seq)
        return self._members

    @staticmethod
    def _sequence(sig: array, idx, p2p_ids: frozenset) -> tuple:
        """(event indices, signature ids) of a rank's collectives in the group, P2P left out."""
        if p2p_ids and not p2p_ids.isdisjoint(sig):
            idx = array("I", (i for i in idx if sig[i] not in p2p_ids))
        # one group and no P2P: the rank's whole signature column is the sequence
        seq = sig if isinstance(idx, range) and len(idx) == len(sig) else array("I", map(sig.__getitem__, idx))
        return idx, seq

    def _align_starts(self, run: Run, name: str, ranks) -> int:
        """Capped logs whose oldest segments were deleted start in the middle of a group: slot 0
        is the first `j` that every member still has (its `start`); what a rank kept from before
        it is left out. Without deleted segments the start is 0."""
        firsts = {}
        for rank in ranks:
            log = run.ranks[rank]
            if not log.dropped:
                continue
            idx = self.index.get(rank)
            firsts[rank] = log.seq[idx[0]] if idx is not None and len(idx) else log.starts.get(name, 0)
        start = max(firsts.values(), default=0)
        if not start:
            return 0
        for rank, idx in list(self.index.items()):
            log = run.ranks[rank]
            first = log.seq[idx[0]] if len(idx) and log.dropped else 0
            skip = min(max(start - first, 0), len(idx))
            if skip:
                self.index[rank] = kept = array("I", idx[skip:])
                self.seq[rank] = array("I", (log.sig[i] for i in kept))
        return start

    def slot(self, rank: int, event: int) -> int | None:
        """The slot of the rank's event `event` in this group, None when it is not one of them."""
        idx = self.index.get(rank)
        if idx is None:
            return None
        p = bisect_left(idx, event) if not isinstance(idx, range) else event - idx.start
        return p if 0 <= p < len(idx) and idx[p] == event else None


@dataclass
class Channel:
    """The point-to-point messages from `src` to `dst` in `group` (global ranks; None: unknown)."""

    group: str
    src: int | None
    dst: int | None
    sends: list[int] = field(default_factory=list)  # event indices in src's log
    recvs: list[int] = field(default_factory=list)  # event indices in dst's log
    open_sends: bool = False  # src's log lost collectives: its sends are cut at the first loss
    open_recvs: bool = False
    # the message number of each side's first kept op: 0, or where a capped log goes on from
    # (its `j`); None when not known (a wrapped Flight Recorder buffer does not number them)
    send_from: int | None = 0
    recv_from: int | None = 0

    def indices(self, rank: int) -> list[int]:
        """The rank's own side of the channel, in issue order."""
        if rank == self.src and rank == self.dst:
            return sorted(self.sends + self.recvs)
        return self.sends if rank == self.src else self.recvs if rank == self.dst else []


class _Cuts:
    """Where a log that lost collectives stops being trusted, per group (see `_cuts`)."""

    def __init__(self):
        self.groups: dict[str, int] = {}  # group -> slots kept
        self.unlocated = False  # some losses are of unknown groups: groups without later events are open
        self.first: int | None = None  # event index of the first loss (P2P channels stop there)


def _cuts(log, p2p_ids: frozenset[int]) -> _Cuts:
    """For each loss of the log, the groups it hit: a group whose next collective after the loss
    has the `j` that follows its last one before lost none of it; the others are cut there. When
    the gaps found do not add up to what was lost, the groups with no collective after the loss
    are cut too (they may have lost their last ones).

    One pass over each group's collectives: a gap in a group's `j`s counts for every loss between
    the two collectives around it (losses come in log order), whatever the number of groups and
    losses."""
    cut = _Cuts()
    losses = log.losses  # (event index, collectives lost or None), in log order
    if not losses:
        return cut
    sig, seq = log.sig, log.seq
    # format 1 has no `j`: every loss is unlocated; nor do logs read without it (their only losses
    # are at their end: nothing after them to locate them by)
    framed = log.header.get("v", 1) >= 2 and len(seq) == len(sig)
    anyway = not framed or not p2p_ids.isdisjoint(sig)  # every loss is unlocated
    at = [n for n, _ in losses]
    cut.first = at[0]
    located = [0] * (len(at) + 1)  # gaps found per loss, as differences from the loss before
    first_gap: dict[str, tuple[int, int]] = {}  # group -> (the first loss that hit it, slots kept)
    ends: dict[str, tuple[int, int]] = {}  # group -> (its last collective, its number of collectives)
    for name, idx in log.by_group.items():
        idx = [i for i in idx if sig[i] not in p2p_ids]
        ends[name] = (idx[-1] if idx else -1, len(idx))
        before, last_j = -1, -1
        for k, i in enumerate(idx):
            gap = seq[i] - last_j - 1 if framed else 1
            if gap:  # the losses after collective `before` and up to this one
                lo, hi = bisect_right(at, before), bisect_right(at, i)
                if lo < hi:
                    located[lo] += gap
                    located[hi] -= gap
                    first_gap.setdefault(name, (lo, k))
            before, last_j = i, seq[i] if framed else 0
    unlocated: list[int] = []  # losses whose gaps do not add up (in log order)
    found = 0
    for p, (_, count) in enumerate(losses):
        found += located[p]
        if anyway or count is None or found != count:
            unlocated.append(p)
    cut.unlocated = bool(unlocated)
    after = [at[p] for p in unlocated]
    for name, (last, n) in ends.items():  # cut where a gap is, or at the end from the first unlocated loss after it
        q = bisect_right(after, last)
        end = unlocated[q] if q < len(unlocated) else None
        gap = first_gap.get(name)
        if gap is not None and (end is None or gap[0] < end):
            cut.groups[name] = gap[1]
        elif end is not None:
            cut.groups[name] = n
    return cut


def _by_group(sig: array, by_group: dict) -> dict[str, array]:
    """group -> the signature ids of its events (`by_group`: their indices), in one pass."""
    if len(by_group) == 1:
        (name, idx), = by_group.items()
        return {name: sig if isinstance(idx, range) and len(idx) == len(sig) else array("I", map(sig.__getitem__, idx))}
    order = array("I")
    for idx in by_group.values():
        order.extend(idx)
    picked = array("I")
    picked.frombytes(np.frombuffer(sig, np.uint32)[np.frombuffer(order, np.uint32)].tobytes() if order else b"")
    bounds = list(accumulate(map(len, by_group.values()), initial=0))
    return dict(zip(by_group, map(picked.__getitem__, map(slice, bounds, bounds[1:]))))  # (C loops: 100,000 groups)


class Sequences:
    """Every group's slots and every channel's messages of one run, built on first use."""

    def __init__(self, run: Run):
        self.run = run
        self.p2p_ids = frozenset(i for i, s in enumerate(run.signatures) if s.op in P2P_OPS)
        self._groups: dict[str, GroupSequences] = {}
        self._p2p_at: dict[tuple, list[int]] = {}
        self._channels: dict[tuple, Channel] | None = None
        self.cuts = {r: _cuts(log, self.p2p_ids) for r, log in run.ranks.items() if log.losses}
        self._holders: dict[str, list[int]] | None = None  # group -> ranks with events in it
        self._dropped = [r for r, log in run.ranks.items() if log.dropped]
        self._plain: dict[int, dict] | None = None
        self._cut: dict[int, dict] | None = None
        self.unlocated = any(cut.unlocated for cut in self.cuts.values())  # losses of groups not known

    def group(self, name: str) -> GroupSequences:
        seqs = self._groups.get(name)
        if seqs is None:
            holders = self.holders.get(name, [])
            cut = self.plain_signatures if holders else None
            if cut is not None and all([r in cut for r in holders]):  # (their events there, as they are)
                plain = self.plain
                seqs = GroupSequences.plain(self.run, name, {r: plain[r][name] for r in holders},
                                            {r: cut[r][name] for r in holders})
            else:
                seqs = GroupSequences(self.run, name, self.p2p_ids, self.cuts, holders, self._dropped)
            self._groups[name] = seqs
        return seqs

    @property
    def holders(self) -> dict[str, list[int]]:
        """group -> the ranks with events in it, in the run's order (once: each group's sequences
        then visit its own ranks only)."""
        if self._holders is None:
            self._holders = {}
            for rank, log in self.run.ranks.items():
                for g in log.by_group:
                    self._holders.setdefault(g, []).append(rank)
        return self._holders

    @property
    def plain(self) -> dict[int, dict]:
        """rank -> its events by group (RankLog.by_group), for the ranks whose sequence in each
        group is their events there, as they are: logs that lost nothing and hold no P2P op, in a
        run where no log lost its beginning (else none)."""
        if self._plain is None:
            self._plain = {}
            if not self._dropped:
                without_p2p: dict[int, bool] = {}  # id of a signature column -> no P2P op in it
                for rank, log in self.run.ranks.items():
                    if rank not in self.cuts:
                        key = id(log.sig)
                        if key not in without_p2p:
                            without_p2p[key] = self.p2p_ids.isdisjoint(log.sig)
                        if without_p2p[key]:
                            self._plain[rank] = log.by_group
        return self._plain

    @property
    def plain_signatures(self) -> dict[int, dict] | None:
        """rank -> its signature ids by group, for the `plain` ranks, each kind of rank's signature
        column cut by group once (not group by group); None where some log's losses are of groups
        not known (every group's sequences then say which ranks are open)."""
        if self._cut is None and not self.unlocated:
            cut_up: dict[tuple, dict] = {}  # (signature column, its groups' indices) -> group -> signature ids
            self._cut = {}
            for rank, by_group in self.plain.items():
                sig = self.run.ranks[rank].sig
                key = (id(sig), id(by_group))
                if key not in cut_up:
                    cut_up[key] = _by_group(sig, by_group)
                self._cut[rank] = cut_up[key]
        return self._cut

    def collectives(self, rank: int, group: str) -> int:
        """How many collectives (P2P left out) the rank issued on the group."""
        return len(self.group(group).index.get(rank, ()))

    def p2p_indices(self, rank: int, group: str) -> list[int]:
        """Event indices of the rank's P2P ops in the group (none to look for in most runs)."""
        key = (rank, group)
        found = self._p2p_at.get(key)
        if found is None:
            log = self.run.ranks.get(rank)
            found = []
            if self.p2p_ids and log is not None:
                sig = log.sig
                found = [i for i in log.group_events(group) if sig[i] in self.p2p_ids]
            self._p2p_at[key] = found
        return found

    def signature_ids(self, rank: int, indices) -> array:
        """The signature ids of the rank's events at `indices` (a channel's side, say)."""
        sig = self.run.ranks[rank].sig
        return array("I", (sig[i] for i in indices))

    @property
    def channels(self) -> dict[tuple, Channel]:
        """(group, src, dst) -> Channel, for every pair that exchanged at least one message."""
        if self._channels is None:
            self._channels = {}
            without_p2p: dict[int, bool] = {}  # id of a signature column -> it has no P2P op (shared columns: once)
            for rank, log in self.run.ranks.items():
                key = id(log.sig)
                if key not in without_p2p:
                    without_p2p[key] = self.p2p_ids.isdisjoint(log.sig)
                if without_p2p[key]:
                    continue
                cut = self.cuts.get(rank)
                stop = cut.first if cut is not None else None
                for i, sid in enumerate(log.sig):
                    if sid not in self.p2p_ids:
                        continue
                    sig = self.run.signatures[sid]
                    group = log.groups[log.gid[i]].name
                    peer = self.run.global_rank(group, sig.root) if sig.root is not None else log.sources.get(i)
                    src, dst = (rank, peer) if sig.op == "send" else (peer, rank)
                    ch = self._channels.get((group, src, dst))
                    if ch is None:
                        ch = self._channels[(group, src, dst)] = Channel(group, src, dst)
                    if stop is not None and i >= stop:
                        continue
                    (ch.sends if sig.op == "send" else ch.recvs).append(i)
            for ch in self._channels.values():
                ch.open_sends, ch.open_recvs = ch.src in self.cuts, ch.dst in self.cuts
                ch.send_from, ch.recv_from = self._first_message(ch.src, ch.sends), self._first_message(ch.dst, ch.recvs)
        return self._channels

    def _first_message(self, rank: int | None, indices: list[int]) -> int | None:
        """The message number of a channel side's first kept op: 0 unless the rank's log lost its
        beginning (a capped log: that op's `j`; nothing kept, or a Flight Recorder buffer that
        wrapped, whose P2P entries carry no per-peer number: not known)."""
        log = self.run.ranks.get(rank) if rank is not None else None
        if log is None or not log.dropped:
            return 0
        if log.header.get("p2p_unnumbered") or not indices:
            return None
        return log.seq[indices[0]]
