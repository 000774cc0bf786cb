"""The orders in which ranks are lined up: a group's collectives and a channel's messages.

Slot k of a group is the k-th collective each member issued on it, point-to-point ops left
out (a pipeline stage's sends are not slots of the group's collectives). Message k of a
channel (group, src, dst) is the src's k-th send to dst and the dst's k-th recv from src,
NCCL's in-order pairing. The matcher, the wait-for graph and the TUI all read them from here,
so "slot k" and "message k" mean the same everywhere.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

from .run import P2P_OPS, Run


class GroupSequences:
    """Each member's collective (non-P2P) event indices in one group, and their signature ids."""

    def __init__(self, run: Run, name: str, p2p_ids: frozenset[int]):
        self.run = run
        self.name = name
        self.index: dict[int, object] = {}  # rank -> event indices (a range when nothing is left out)
        self.seq: dict[int, array] = {}  # rank -> signature ids, in slot order
        for rank, log in run.ranks.items():
            idx = log.by_group.get(name)
            if idx is None:
                continue
            sig = log.sig
            if p2p_ids and not p2p_ids.isdisjoint(sig):
                idx = array("I", (i for i in idx if sig[i] not in p2p_ids))
            self.index[rank] = idx
            # one group and no P2P: the rank's whole signature column is the sequence
            self.seq[rank] = sig if isinstance(idx, range) and len(idx) == len(sig) else array("I", (sig[i] for i in idx))

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

    def indices(self, rank: int) -> list[int]:
        """The rank's own side of the channel, in issue order."""
        if rank == self.src and rank == self.dst:
            return sorted(self.sends + self.recvs)
        return self.sends if rank == self.src else self.recvs if rank == self.dst else []


class Sequences:
    """Every group's slots and every channel's messages of one run, built on first use."""

    def __init__(self, run: Run):
        self.run = run
        self.p2p_ids = frozenset(i for i, s in enumerate(run.signatures) if s.op in P2P_OPS)
        self._groups: dict[str, GroupSequences] = {}
        self._p2p_at: dict[tuple, list[int]] = {}
        self._channels: dict[tuple, Channel] | None = None

    def group(self, name: str) -> GroupSequences:
        seqs = self._groups.get(name)
        if seqs is None:
            seqs = self._groups[name] = GroupSequences(self.run, name, self.p2p_ids)
        return seqs

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
            for rank, log in self.run.ranks.items():
                if self.p2p_ids.isdisjoint(log.sig):
                    continue
                for i, sid in enumerate(log.sig):
                    if sid not in self.p2p_ids:
                        continue
                    sig = self.run.signatures[sid]
                    group = log.groups[log.gid[i]].name
                    peer = self.run.global_rank(group, sig.root)
                    src, dst = (rank, peer) if sig.op == "send" else (peer, rank)
                    ch = self._channels.get((group, src, dst))
                    if ch is None:
                        ch = self._channels[(group, src, dst)] = Channel(group, src, dst)
                    (ch.sends if sig.op == "send" else ch.recvs).append(i)
        return self._channels
