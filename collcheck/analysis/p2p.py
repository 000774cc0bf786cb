"""Pair point-to-point ops per (group, src, dst) in issue order; paired ops must agree on
tensors and tag."""

from __future__ import annotations

from collections import defaultdict

from ..model import Run
from .findings import Finding


def global_rank(run: Run, group: str, group_rank: int | None) -> int | None:
    """A group rank (a P2P peer) as a global rank."""
    members = run.group_members(group)
    if group_rank is None or not members or group_rank >= len(members) or group_rank < 0:
        return group_rank
    return members[group_rank]


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


def match_p2p(run: Run, p2p_sigs: set[int]) -> list[Finding]:
    sends: dict[tuple, list] = defaultdict(list)  # (group, src, dst) -> [(rank, event index)]
    recvs: dict[tuple, list] = defaultdict(list)
    for rank, log in run.ranks.items():
        if not p2p_sigs:
            break
        if p2p_sigs.isdisjoint(log.sig):
            continue
        for i, sid in enumerate(log.sig):
            if sid not in p2p_sigs:
                continue
            sig = run.signatures[sid]
            group = log.groups[log.gid[i]].name
            peer = global_rank(run, group, sig.root)
            if sig.op == "send":
                sends[(group, rank, peer)].append(i)
            else:
                recvs[(group, peer, rank)].append(i)
    findings = []
    for key in sorted(set(sends) | set(recvs), key=str):
        group, src, dst = key
        s, r = sends.get(key, []), recvs.get(key, [])
        for k in range(max(len(s), len(r))):
            se = run.ranks[src].event(s[k]) if k < len(s) else None
            re = run.ranks[dst].event(r[k]) if k < len(r) and dst in run.ranks else None
            if se is not None and re is not None:
                kind = _field_mismatch(se.sig, re.sig)
                if kind:
                    findings.append(Finding(kind, group, k, sorted({src, dst}), "", {src: se, dst: re}, None,
                                            {"p2p": True, "src": src, "dst": dst}, min(se.t_issue, re.t_issue)))
                continue
            lonely = se or re
            owner = src if se is not None else dst
            peer = dst if se is not None else src
            findings.append(Finding("unmatched_p2p", group, k, sorted({owner, peer} - {None}), "",
                                    {owner: lonely}, None,
                                    {"p2p": True, "src": src, "dst": dst,
                                     "missing": "recv" if se is not None else "send"},
                                    lonely.t_issue if lonely else 0))
    return findings
