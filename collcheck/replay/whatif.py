"""What-if edits of a replay plan: drop, insert or move one rank's collective, and let ranks cut
by the hang follow their peers afterwards (docs/replay.md).

They work on `plan.rank_actions` lists (per recorded rank) before `build_plan` remaps ranks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..base.errors import UsageError
from ..logfile.reader import LogError
from ..model import P2P_OPS, Run


@dataclass(frozen=True)
class Edit:
    """drop rank:i | insert rank:i=src_rank:src_i (before rank's event i) | move rank:i:j (before event j)."""

    kind: str
    rank: int
    index: int
    other_rank: int | None = None
    other_index: int | None = None

    def describe(self) -> str:
        if self.kind == "drop":
            return f"drop rank {self.rank}'s collective #{self.index}"
        if self.kind == "insert":
            return (f"insert rank {self.other_rank}'s collective #{self.other_index} into rank {self.rank} "
                    f"before its #{self.index}")
        return f"move rank {self.rank}'s collective #{self.index} before its #{self.other_index}"


def parse_edit(kind: str, text: str) -> Edit:
    try:
        if kind == "drop":
            r, i = text.split(":")
            return Edit("drop", int(r), int(i))
        if kind == "insert":
            left, right = text.split("=")
            r, i = left.split(":")
            sr, si = right.split(":")
            return Edit("insert", int(r), int(i), int(sr), int(si))
        if kind == "move":
            r, i, j = text.split(":")
            return Edit("move", int(r), int(i), int(r), int(j))
    except ValueError:
        pass
    forms = {"drop": "RANK:INDEX", "insert": "RANK:INDEX=SRC_RANK:SRC_INDEX", "move": "RANK:INDEX:BEFORE_INDEX"}
    raise UsageError(f"--{kind} {text!r}: expected {forms[kind]} (indices as `collcheck show` numbers them)")


def _find(acts: list, i: int, rank: int) -> int:
    for k, a in enumerate(acts):
        if a["k"] == "op" and a["i"] == i:
            return k
    raise LogError(f"rank {rank} has no collective #{i} (`collcheck show` lists them)")


_inserted = itertools.count(1_000_000_000)


def apply_edit(per_rank: dict, e: Edit) -> None:
    if e.rank not in per_rank:
        raise LogError(f"what-if on rank {e.rank}, which is not replayed")
    acts = per_rank[e.rank]
    if e.kind == "drop":
        del acts[_find(acts, e.index, e.rank)]
    elif e.kind == "insert":
        src = per_rank.get(e.other_rank)
        if src is None:
            raise LogError(f"--insert copies from rank {e.other_rank}, which is not replayed")
        a = dict(src[_find(src, e.other_index, e.other_rank)])
        a.update(i=next(_inserted), a=0, td=None, e=0)
        at = _find(acts, e.index, e.rank) if e.index >= 0 else _end_index(acts)
        a["ts"] = acts[at].get("ts") if at < len(acts) else None
        acts.insert(at, a)
    elif e.kind == "move":
        k = _find(acts, e.index, e.rank)
        a = acts.pop(k)
        at = _find(acts, e.other_index, e.rank) if e.other_index >= 0 else _end_index(acts)
        a = dict(a, a=0, ts=acts[at].get("ts") if at < len(acts) else a.get("ts"))
        acts.insert(at, a)


def follow_peers(run: Run, per_rank: dict) -> list[str]:
    """Give each rank cut by the hang the collectives its peers still issue after its end.

    A recording stops where the hang stopped the rank: its future is unknown. Once a what-if
    has changed the sequences, the useful question is whether the *recorded* collectives now
    line up, so a cut rank is assumed to go on in step with its peers: in every group, it
    issues copies of the collectives that the member furthest along issued beyond its own
    count (P2P excluded), in the order they were recorded. Returns notes for the report.
    """
    def collectives(acts, g):
        return [a for a in acts if a["k"] == "op" and a["g"] == g and a["op"] not in P2P_OPS]

    snapshot = {r: list(acts) for r, acts in per_rank.items()}  # peers' tails come from recorded + edited ops only
    added: dict = {}
    for r, acts in snapshot.items():
        if not (acts and acts[-1]["k"] == "end" and acts[-1].get("cut")):
            continue
        tail = []
        groups = {a["g"] for other in snapshot.values() for a in other if a["k"] == "op"}
        for g in sorted(groups):
            members = set(run.group_members(g))
            if r not in members:
                continue
            own = len(collectives(acts, g))
            peers = [collectives(snapshot[m], g) for m in members if m != r and m in snapshot]
            longest = max(peers, key=len, default=[])
            tail += [(a.get("ts") or 0, n, a) for n, a in enumerate(longest[own:])]
        if not tail:
            continue
        tail.sort(key=lambda x: (x[0], x[1]))
        copies = [dict(a, i=next(_inserted), a=0, td=None, e=0) for _, _, a in tail]
        per_rank[r] = acts[:-1] + copies + [dict(acts[-1], state="finished", cut=False)]
        added[r] = len(copies)
    if not added:
        return []
    which = ", ".join(f"rank {r} +{n}" for r, n in sorted(added.items()))
    return [f"ranks cut by the hang follow their peers after their last recorded collective ({which}; "
            "--no-follow replays only what was recorded)"]


def _end_index(acts):
    return len(acts) - 1 if acts and acts[-1]["k"] == "end" else len(acts)
