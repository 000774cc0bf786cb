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
    """Whether `peer` exchanges with `owner` in the missing direction on another group."""
    group, src, dst = key
    want = (peer, owner) if peer == src else (owner, peer)
    return any(k[0] != group and (k[1], k[2]) == want for k in channels)


def match_p2p(run: Run, sequences: Sequences) -> list[Finding]:
    """Message k of each channel: the k-th send and the k-th recv agree, or a finding. Capped logs
    are compared from the first message both sides kept."""
    findings = []
    channels = sequences.channels
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
            # another group): then the pairing is wrong, and both ends are named
            elsewhere = peer is not None and _posts_elsewhere(channels, key, peer, owner)
            culprits = sorted({owner, peer} - {None}) if elsewhere or peer is None else [peer]
            findings.append(Finding("unmatched_p2p", group, k, culprits, "",
                                    {owner: lonely}, None,
                                    {"p2p": True, "src": src, "dst": dst,
                                     "missing": "recv" if se is not None else "send",
                                     **({"elsewhere": True} if elsewhere else {})},
                                    lonely.t_issue if lonely else 0))
    if unknown:
        pairs = ", ".join(f"{c.src}->{c.dst}" for c in unknown[:6]) + (" ..." if len(unknown) > 6 else "")
        run.warnings.append(f"point-to-point messages {pairs} not matched: a wrapped Flight Recorder buffer "
                            "does not say how many messages each peer had exchanged before its first kept entry")
    return findings
