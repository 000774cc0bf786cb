"""Replay plans: every rank's recorded group creations and collectives, as JSON-able actions.

`build_plan(run)` reads each rank's log once more, in order, to interleave group
lifecycle records with collectives (the run model keeps them apart) and to pick up what
the analysis does not need (call sites, labels, async flags, completion times).
Signatures (op, tensors, reduce op, root, role, api, tag) come from the run model.

Ranks can be selected (`ranks=`): the plan then runs on len(ranks) processes, ranks
renumbered in order, every group restricted to the selected members, point-to-point ops
with an unselected peer dropped. What-if edits (whatif.py) change the sequences before
the plan is finalized. `shrink` caps tensor sizes (see `shrink_shapes`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ..logfile import format as lf
from ..logfile.decode import Decoder
from ..logfile.ops import SHAPE_FREE_OPS
from ..logfile.reader import LogError, LogStream, read_bytes
from ..model import P2P_OPS, ROOTED_OPS, Run
from .whatif import apply_edit, follow_peers


@dataclass
class Plan:
    world: int
    ranks: list  # replay rank -> [action, ...]
    rank_map: list  # replay rank -> recorded rank
    timeout_s: float = 5.0
    notes: list = field(default_factory=list)
    source: str = ""
    backend: str = "gloo"  # or "simnccl": NCCL's semantics (calls return at once, nothing checked)

    def to_json(self) -> dict:
        return {"version": 1, "world": self.world, "timeout_s": self.timeout_s, "rank_map": self.rank_map,
                "source": self.source, "notes": self.notes, "backend": self.backend,
                "ranks": [[_public(a) for a in acts] for acts in self.ranks]}

    def ops(self, rank: int) -> list:
        return [a for a in self.ranks[rank] if a["k"] == "op"]

    def n_ops(self) -> int:
        return sum(len(self.ops(r)) for r in range(self.world))

    def copy(self) -> "Plan":
        return copy.deepcopy(self)


_PRIVATE = ("ts", "td", "or")


def _public(a: dict) -> dict:
    return {k: v for k, v in a.items() if k not in _PRIVATE and v is not None and v != [] and not (k in ("a", "e", "cut") and not v)}


# ----------------------------------------------------------------------------------------
# reading


def rank_actions(run: Run, rank: int) -> list[dict]:
    """The rank's creations, collectives and end, in recorded order (global ranks, recorded names)."""
    log = run.ranks[rank]
    data = read_bytes(log.path)
    lost = set(log.lost)
    decoder = Decoder(LogStream(data, log.path))
    strings = decoder.tables.strings

    def site(rec: dict) -> list | None:
        found = decoder.tables.sites.get(rec.get("s"))
        return None if found is None else list(found)

    actions: list = []
    by_eid: dict = {}
    n = 0
    try:
        for _, rec, eid in decoder:
            k = rec["k"]
            if k == lf.GROUP and rec.get("op") in ("new", "split"):
                ranks = rec.get("r")
                actions.append({"k": "new", "ranks": list(ranks) if ranks is not None else None, "desc": rec.get("d"),
                                "name": rec.get("g") if rec.get("m", True) else None, "s": site(rec),
                                "ts": rec.get("ts")})
            elif k == lf.GROUP and rec.get("op") == "destroy":
                actions.append({"k": "destroy", "name": rec.get("g"), "all": bool(rec.get("all", True)), "ts": rec.get("ts")})
            elif k == lf.COLL:
                if eid in lost:
                    continue
                if n >= len(log):
                    break
                sig = run.signatures[log.sig[n]]
                group = log.groups[log.gid[n]].name
                members = run.group_members(group)
                peer = sig.root
                if peer is None and sig.op in ROOTED_OPS and members:
                    peer = 0  # unrecorded root (Flight Recorder input): the group's first member
                if peer is not None and 0 <= peer < len(members):
                    peer = members[peer]
                act = {"k": "op", "i": n, "op": sig.op, "g": group, "t": [[d, list(s)] for d, s in sig.tensors],
                       "r": sig.reduce_op, "p": peer, "tag": sig.tag or None, "api": sig.api, "role": sig.role,
                       "label": strings.get(rec["l"]) if "l" in rec else None, "s": site(rec),
                       "a": 1 if rec.get("a") else 0, "q": rec.get("q") if sig.api == "batch_isend_irecv" else None,
                       "ts": rec.get("ts", 0), "td": None, "or": rank}
                sizes = log.a2a.get(n)
                if sizes is not None:  # all_to_all_single: input and splits as recorded
                    rows, per_row, ins, outs = sizes
                    act["t"] = [[d, [rows] if per_row == 1 else [rows, per_row]] for d, _ in sig.tensors]
                    act["sp"] = [list(ins), list(outs)]
                elif sig.op in SHAPE_FREE_OPS:
                    act["t"] = [[d, []] for d, _ in sig.tensors]
                actions.append(act)
                by_eid[eid] = act
                n += 1
            elif k == lf.DONE:
                act = by_eid.get(rec.get("i"))
                if act is not None:
                    if "e" in rec:
                        act["e"] = 1
                    if "c" in rec:
                        act["td"] = rec["c"]
    except (KeyError, TypeError, IndexError) as exc:
        raise LogError(f"{log.path}: cannot read for replay ({type(exc).__name__}: {exc})") from None
    state = log.state
    end = {"k": "end", "state": "finished"}
    errored_last = any(a["k"] == "op" and a.get("e") for a in actions[-1:])
    if state == "raised":
        if not errored_last:
            end = {"k": "end", "state": "raised", "m": f"{log.exception[0]}: {log.exception[1]}"[:300]}
    elif state in ("killed", "dumped"):  # a Flight Recorder dump ends where the job was stopped
        end = {"k": "end", "state": "killed"}
    # cut by the hang: the rank stopped inside a collective, so what it would have done
    # next was never recorded (what-ifs may let it follow its peers, see follow_peers)
    end["cut"] = state in ("stuck", "killed-in-collective", "waiting-at-dump", "recording-stopped") or (
        state == "raised" and errored_last)
    # the recorded op errored and was the rank's last: nothing continues after it
    for a in actions:
        if a["k"] == "op" and a.get("e") and a is _last_op(actions):
            a["e"] = 0
    actions.append(end)
    return actions


def _last_op(actions):
    return next((a for a in reversed(actions) if a["k"] == "op"), None)


# ----------------------------------------------------------------------------------------
# building


def build_plan(run: Run, ranks=None, shrink: int | None = None, timeout_s: float = 5.0,
               edits=(), per_rank: dict | None = None, follow: bool = True) -> Plan:
    """A plan replaying `ranks` (default: all) of `run`; edits are applied to recorded ranks' sequences.

    With edits and `follow`, ranks cut by the hang continue like their peers (`follow_peers`)."""
    if run.world == 0 or not run.ranks:
        raise LogError(f"{run.directory}: no rank logs to replay")
    missing = sorted(set(range(run.world)) - set(run.ranks))
    selected = sorted(set(range(run.world)) if ranks is None else set(ranks))
    absent = [r for r in selected if r not in run.ranks]
    if absent:
        raise LogError(f"cannot replay rank(s) {absent}: no log for them" + (
            "; select ranks that have logs with --ranks" if missing else ""))
    if per_rank is None:
        per_rank = {r: rank_actions(run, r) for r in selected}
    else:
        per_rank = {r: copy.deepcopy(per_rank[r]) for r in selected}
    for edit in edits:
        apply_edit(per_rank, edit)
    notes = []
    if edits and follow:
        notes += follow_peers(run, per_rank)
    remap = {r: k for k, r in enumerate(selected)}
    plan_ranks = []
    dropped_p2p = 0
    substituted: set = set()
    for r in selected:
        out = []
        for a in per_rank[r]:
            a = dict(a)
            if a["k"] == "new":
                if a["ranks"] is None:
                    continue
                kept = [remap[x] for x in a["ranks"] if x in remap]
                if not kept:
                    continue  # no selected member: not created (group names are mapped back by order)
                a["ranks"] = kept
            elif a["k"] == "op":
                if a.get("sp") is not None and any(m not in remap for m in run.group_members(a["g"])):
                    del a["sp"]  # split sizes hold for the whole group only: even splits instead
                    a["t"] = [[d, []] for d, _ in a["t"]]
                if a["op"] in P2P_OPS and a.get("p") is not None and a["p"] not in remap:
                    dropped_p2p += 1
                    continue
                if a.get("p") is not None:
                    if a["p"] not in remap:  # rooted op whose root is not selected: the group's lowest selected member
                        members = [x for x in run.group_members(a["g"]) if x in remap] or [r]
                        substituted.add((a["g"], a["p"]))
                        a["p"] = members[0]
                    a["p"] = remap[a["p"]]
            out.append(a)
        plan_ranks.append(out)
    if substituted:
        notes.append(f"{len(substituted)} root(s) outside the selected ranks replaced by the group's lowest selected member")
    if dropped_p2p:
        notes.append(f"{dropped_p2p} point-to-point op(s) with an unselected peer dropped")
    if any(a.get("r") in (1, 8) for acts in plan_ranks for a in acts if a["k"] == "op"):
        notes.append("AVG / PREMUL_SUM reductions are not supported by gloo: the replay raises there")
    plan = Plan(len(selected), plan_ranks, selected, timeout_s, notes, run.directory)
    if shrink:
        shrink_shapes(plan, shrink)
    finalize(plan)
    return plan


def finalize(plan: Plan) -> None:
    """Waits for async ops: an async op is waited for before the first later op of its rank that
    was issued after it completed in the recording (the recorded happens-before, never more)."""
    for acts in plan.ranks:
        open_ops = []  # (id, completion time or None) of async ops not waited for yet
        for a in acts:
            a.pop("w", None)
            if open_ops:
                ts = a.get("ts")
                if a["k"] == "end":  # a rank that finished had waited for everything
                    due = [i for i, td in open_ops if td is not None or a.get("state") == "finished"]
                else:
                    due = [i for i, td in open_ops if ts is not None and td is not None and ts >= td]
                if due:
                    a["w"] = due
                    open_ops = [(i, td) for i, td in open_ops if i not in due]
            if a["k"] == "op" and a.get("a"):
                open_ops.append((a["i"], a.get("td")))


# ----------------------------------------------------------------------------------------
# shrinking


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _shapes_of(numel: int, ndim: int):
    """Shapes with `ndim` dims and `numel` elements, 1-D first."""
    if ndim == 0:
        if numel == 1:
            yield []
        return
    if ndim == 1:
        yield [numel]
        return
    for d in range(numel, 0, -1):
        if numel % d == 0:
            for rest in _shapes_of(numel // d, ndim - 1):
                yield [d] + rest


def shrink_shapes(plan: Plan, cap: int) -> None:
    """Cap every tensor at about `cap` elements, keeping across all ranks: which shapes are
    equal and which differ, which element counts are equal and their order, and each
    shape's number of dimensions (so every size relation the analysis or gloo sees stays)."""
    # all_to_all_single with recorded splits keeps its sizes (the splits are counted in its rows)
    shapes = sorted({tuple(s) for acts in plan.ranks for a in acts if a["k"] == "op" and not a.get("sp")
                     for _, s in a.get("t") or []},
                    key=lambda s: (_numel(s), len(s), s))
    big = [s for s in shapes if _numel(s) > cap]
    if not big:
        return
    small_numels = sorted({_numel(s) for s in shapes if _numel(s) <= cap})
    numels = sorted({_numel(s) for s in big})
    mapping: dict = {}
    used: set = {tuple(s) for s in shapes if _numel(s) <= cap}
    nxt = 16 * (max(small_numels[-1] // 16, 0) + 1) if small_numels else 16
    nxt = max(nxt, 16)
    target = {}
    for n in numels:  # distinct counts -> distinct increasing multiples of 16 (many divisors)
        target[n] = nxt
        nxt += 16
    for s in big:
        m = target[_numel(s)]
        for cand in _shapes_of(m, len(s)):
            if tuple(cand) not in used:
                mapping[s] = cand
                used.add(tuple(cand))
                break
        else:
            mapping[s] = list(s)  # no free small shape: keep it
    for acts in plan.ranks:
        for a in acts:
            if a["k"] == "op" and a.get("t") and not a.get("sp"):
                a["t"] = [[d, mapping.get(tuple(s), list(s))] for d, s in a["t"]]
    plan.notes.append(f"tensors capped at ~{cap} elements ({len(mapping)} distinct shapes shrunk)")


# ----------------------------------------------------------------------------------------
# rank selection (scale-down)


def involved_ranks(run: Run, finding) -> tuple[list[int], str]:
    """The ranks a replay needs to reproduce `finding`, and why."""
    culprits = sorted(finding.ranks)
    if finding.kind in ("deadlock",):
        return sorted(finding.details.get("cycle", culprits)), "the ranks of the wait-for cycle"
    if finding.details.get("p2p") or finding.kind == "unmatched_p2p":
        d = finding.details
        return sorted({d.get("src"), d.get("dst"), *culprits} - {None}), "the sender and the receiver"
    if finding.kind == "hang":
        ranks = set(finding.details.get("waiting") or []) | set(finding.details.get("root_causes") or [])
        return sorted(ranks | set(culprits)), "the waiting ranks and the ranks they wait on"
    members = list(run.group_members(finding.group)) if finding.kind != "group_mismatch" else sorted(run.ranks)
    members = [m for m in members if m in run.ranks] or sorted(run.ranks)
    if len(members) <= 4:
        return members, f"every member of group {finding.group}"
    others = [m for m in members if m not in culprits]
    ref = finding.expected.rank if finding.expected is not None else None
    # representatives of each other signature first, then the reference rank, then the lowest
    reps = [r for r, e in finding.events.items() if r not in culprits]
    order = ([ref] if ref in others else []) + [r for r in reps if r in others] + others
    witnesses: list = []
    for r in order:
        if r not in witnesses:
            witnesses.append(r)
        if len(witnesses) >= len(culprits) + 1:
            break
    return sorted(set(culprits) | set(witnesses)), (
        f"the culprit rank(s) and {len(witnesses)} other member(s) of group {finding.group} (a majority, as recorded)")
