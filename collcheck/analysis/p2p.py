"""Pair point-to-point ops per (group, src, dst) in issue order; paired ops must agree on
tensors and tag."""

from __future__ import annotations

from ..model import Run, Sequences
from .findings import Finding


def _field_mismatch(send, recv) -> str | None:
    """What the k-th send and the k-th recv of one (group, src, dst) disagree on, if anything.
    In-order pairing is NCCL's rule; gloo also needs equal tags, so a tag difference is the
    divergence under both (a hang under gloo, silent under NCCL)."""
    if send.shapes != recv.shapes:
        return "shape_mismatch"
    if send.dtypes != recv.dtypes:
        return "dtype_mismatch"
    if send.tag != recv.tag:
        return "tag_mismatch"
    return None


def _posts_elsewhere(channels: dict, key: tuple, peer: int, owner: int) -> bool:
    """Whether `peer` posted more of the missing half to `owner` on another group than it paired
    there (a receive, or a send, addressed on the wrong group)."""
    group, src, dst = key
    for (g, s, d), c in channels.items():
        if g != group and (s, d) == (src, dst):
            peers, owners = (c.sends, c.recvs) if peer == src else (c.recvs, c.sends)
            if len(peers) > len(owners):
                return True
    return False


def _same_wait(run: Run, channels: dict, key: tuple, sending: bool) -> bool:
    """Whether the peer ended waiting on the owner the same way: its last call an unmatched send to
    the owner while the owner's send is unmatched (or both receive from each other): a cycle of
    one kind, where neither end alone is out of step."""
    group, src, dst = key
    back = channels.get((group, dst, src))
    if back is None:
        return False
    peer = dst if sending else src
    mine, other = (back.sends, back.recvs) if sending else (back.recvs, back.sends)
    log = run.ranks.get(peer)
    return len(mine) > len(other) and log is not None and len(log) > 0 and mine[-1] == len(log) - 1


def _senders_to(channels: dict) -> dict[tuple, set]:
    """(group, receiver) -> the ranks that send to it there, from every channel once."""
    out: dict[tuple, set] = {}
    for (g, src, dst), ch in channels.items():
        if src is not None and ch.sends:
            out.setdefault((g, dst), set()).add(src)
    return out


def _any_source_senders(run: Run, senders_to: dict, group: str, receiver: int) -> list[int] | None:
    """A receive from any source that no send reached (it never completed, so no sender was
    recorded): the ranks that should have sent are the ones that send to the receiver on that
    group (each of them may owe it the message), else the group's other members. Never the
    receiver itself: it posted its half."""
    senders = sorted(senders_to.get((group, receiver), ()))
    if not senders:
        senders = sorted(r for r in run.group_members(group) if r != receiver and r in run.ranks)
    return senders or None


def match_p2p(run: Run, sequences: Sequences) -> list[Finding]:
    """Message k of each channel: the k-th send and the k-th recv agree, or a finding. Capped logs
    are compared from the first message both sides kept."""
    findings = []
    channels = sequences.channels
    senders_to = None  # (made when an any-source receive is left without a send)
    unknown = []
    for key in sorted(channels, key=str):
        group, src, dst = key
        ch = channels[key]
        if ch.send_from is None or ch.recv_from is None:
            unknown.append(ch)
            continue
        s, r = ch.sends, ch.recvs
        start = max(ch.send_from, ch.recv_from)
        for k in range(start, max(ch.send_from + len(s), ch.recv_from + len(r))):
            ks, kr = k - ch.send_from, k - ch.recv_from
            if (ks >= len(s) and ch.open_sends) or (kr >= len(r) and ch.open_recvs):
                break  # that side's log lost messages: what it issued from here is not known
            se = run.ranks[src].event(s[ks]) if ks < len(s) else None
            re = run.ranks[dst].event(r[kr]) if kr < len(r) and dst in run.ranks else None
            if se is not None and re is not None:
                kind = _field_mismatch(se.sig, re.sig)
                if kind:
                    findings.append(Finding(kind, group, k, sorted({src, dst}), "", {src: se, dst: re}, None,
                                            {"p2p": True, "src": src, "dst": dst}, min(se.t_issue, re.t_issue)))
                continue
            lonely = se or re
            owner = src if se is not None else dst
            peer = dst if se is not None else src
            # the peer that should have posted the other half, unless it did so elsewhere (on
            # another group), or waits on the owner in the same way (both receive, or both send,
            # from each other): then the pairing is wrong, and both ends are named
            elsewhere = peer is not None and (_posts_elsewhere(channels, key, peer, owner)
                                              or _same_wait(run, channels, key, se is not None))
            if peer is None and senders_to is None:
                senders_to = _senders_to(channels)
            senders = _any_source_senders(run, senders_to, group, owner) if peer is None else None
            culprits = senders or (sorted({owner, peer} - {None}) if elsewhere or peer is None else [peer])
            findings.append(Finding("unmatched_p2p", group, k, culprits, "",
                                    {owner: lonely}, None,
                                    {"p2p": True, "src": src, "dst": dst,
                                     "missing": "recv" if se is not None else "send",
                                     **({"elsewhere": True} if elsewhere else {}),
                                     **({"any_source": senders} if senders else {})},
                                    lonely.t_issue if lonely else 0))
    if unknown:
        pairs = ", ".join(f"{c.src}->{c.dst}" for c in unknown[:6]) + (" ..." if len(unknown) > 6 else "")
        run.warnings.append(f"point-to-point messages {pairs} not matched: a wrapped Flight Recorder buffer "
                            "does not say how many messages each peer had exchanged before its first kept entry")
    return findings
