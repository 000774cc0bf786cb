"""How many collectives and messages each rank posted: the counts behind the wait-for arcs."""

from __future__ import annotations

from bisect import bisect_left

from ..model import Run, Sequences


class Channels:
    """Counts behind the wait-for arcs, in the model's slots (P2P left out of a group's
    collectives). A P2P op waits on its peer only while the peer has not posted the matching
    op: the k-th of that (group, src, dst, tag)."""

    def __init__(self, run: Run, sequences: Sequences):
        self.run = run
        self.seqs = sequences

    def collectives(self, rank: int, group: str) -> int:
        return self.seqs.collectives(rank, group)

    def collective_position(self, rank: int, ev) -> int:
        """Its slot in the model (a capped log's kept part starts at the group's `start`)."""
        slot = self.seqs.group(ev.group).slot(rank, ev.index)
        if slot is not None:
            return slot
        return ev.position - bisect_left(self.seqs.p2p_indices(rank, ev.group), ev.index)

    def _messages(self, rank: int, group: str, op: str, peer: int, tag: int, before: int | None = None) -> int:
        log = self.run.ranks.get(rank)
        if log is None:
            return 0
        n = 0
        for i in self.seqs.p2p_indices(rank, group):
            if before is not None and i >= before:
                break
            s = self.run.signatures[log.sig[i]]
            if s.op == op and s.tag == tag and self.run.global_rank(group, s.root) == peer:
                n += 1
        return n

    def delivered(self, rank: int, ev) -> bool:
        """A send whose matching recv completed on the peer: it is not where the rank waits, whatever
        its own completion says (gloo's send work has none to report) or the error the rank raised
        later in the same batch (a `batch_isend_irecv` waits in all its ops)."""
        if ev.sig.op != "send" or ev.peer_global is None:
            return False
        ch = self.seqs.channels.get((ev.group, rank, ev.peer_global))
        if ch is None or ch.send_from is None or ch.recv_from is None or ev.index not in ch.sends:
            return False
        j = ch.sends.index(ev.index) + ch.send_from - ch.recv_from
        peer = self.run.ranks.get(ev.peer_global)
        if peer is None or not 0 <= j < len(ch.recvs) or not peer.completed(ch.recvs[j]):
            return False
        # gloo's recv reports no completion either ("returned, completion unknown"): only a peer that
        # went on to finish its program had its waits return
        return ch.recvs[j] not in peer.unconfirmed_set or peer.state == "finished"

    def partner_posted(self, rank: int, ev) -> bool:
        """Whether the peer issued the send (or recv) that pairs with this recv (or send)."""
        op = "send" if ev.sig.op == "send" else "recv_"  # (a recv from any source counts as a recv)
        theirs = "recv_" if op == "send" else "send"
        k = self._messages(rank, ev.group, op, ev.peer_global, ev.sig.tag, before=ev.index)
        posted = self._messages(ev.peer_global, ev.group, theirs, rank, ev.sig.tag)
        src, dst = (rank, ev.peer_global) if op == "send" else (ev.peer_global, rank)
        ch = self.seqs.channels.get((ev.group, src, dst))
        if ch is not None:  # capped logs count from where each side goes on
            mine, peers = (ch.send_from, ch.recv_from) if op == "send" else (ch.recv_from, ch.send_from)
            if mine is None or peers is None:
                return True  # not known (a wrapped Flight Recorder buffer): no wait is claimed
            k, posted = k + mine, posted + peers
        return posted > k
