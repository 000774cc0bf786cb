"""`analyse(run)`: every group aligned, P2P paired, group creation compared, hang analysed."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from ..model import Run
from .align import GroupSequences, align_group, p2p_signature_ids
from .findings import Finding
from .fold import rank_ranges
from .hang import HangAnalysis, analyse_hang, hang_findings, where_killed
from .p2p import match_p2p
from .splits import split_findings


@dataclass
class Report:
    run: Run
    findings: list[Finding]
    hang: HangAnalysis
    counts: dict = field(default_factory=dict)  # group -> collectives per rank (majority)

    @property
    def verdict(self) -> str:
        kinds = {f.kind for f in self.findings}
        if "deadlock" in kinds:
            return "deadlock"
        if "hang" in kinds or self.hang.inside:
            return "hang"
        return "mismatch" if self.findings else "clean"

    @property
    def first(self) -> Finding | None:
        return self.findings[0] if self.findings else None


def analyse(run: Run) -> Report:
    hang = analyse_hang(run)
    p2p = p2p_signature_ids(run)
    findings: list[Finding] = []
    counts = {}
    cut_short = frozenset(r for r, s in hang.states.items() if s.state in ("crashed", "killed"))
    findings += group_creation_findings(run)
    for name in run.group_names():
        seqs = GroupSequences(run, name, p2p)
        lengths = Counter(len(s) for s in seqs.seq.values())
        counts[name] = lengths.most_common(1)[0][0] if lengths else 0
        aligned = align_group(run, seqs, hang.inside, cut_short)
        findings += aligned + split_findings(run, seqs, min((f.position for f in aligned), default=None))
    p2p_findings = match_p2p(run, p2p)
    if p2p_findings:  # clocks of different processes cannot order them among themselves
        first = min(f.time for f in p2p_findings)
        for f in p2p_findings:
            f.time = first
    findings += p2p_findings
    divergences = sorted(findings, key=lambda f: (f.time, f.group, f.position, f.ranks))
    hangs = hang_findings(run, hang)
    # calls torch skipped on non-members explain what follows; alone they changed nothing
    skipped = non_member_findings(run) if divergences or hangs else []
    if hangs and not divergences and hang.root_causes:  # no divergence to point at: the root causes
        hangs[0].details["fix"] = ("the sequences line up: look at why the root-cause rank(s) stopped "
                                   "(their state and detail below: what they raised, or where they were)")
    findings = skipped + divergences + hangs
    for f in findings:
        f.message = explain(run, f)
    return Report(run, findings, hang, counts)


def group_creation_findings(run: Run) -> list[Finding]:
    """The i-th new_group/split_group must name the same ranks on every rank."""
    seqs = {r: [c for c in log.creations if c.op in ("new", "split")] for r, log in run.ranks.items()}

    def key(c):  # members, and the user's name for the group when given (group_desc)
        return (c.ranks, c.desc)

    if len({tuple(key(c) for c in s) for s in seqs.values()}) <= 1:
        return []
    n = max(len(s) for s in seqs.values())
    for i in range(n):
        at = {r: (key(s[i]) if i < len(s) else None) for r, s in seqs.items()}
        counts = Counter(at.values())
        if len(counts) == 1:
            continue
        ref = max(counts.items(), key=lambda kv: (kv[1], kv[0] is not None, -min(r for r, v in at.items() if v == kv[0])))[0]
        culprits = sorted(r for r, v in at.items() if v != ref)
        name = next((s[i].name for s in seqs.values() if i < len(s) and key(s[i]) == ref and s[i].name), "?")
        details = {"creations": {r: ({"ranks": list(v[0]) if v[0] else None, "desc": v[1]} if v is not None else None)
                                 for r, v in at.items()},
                   "sites": {r: s[i].site for r, s in seqs.items() if i < len(s)}, "index": i}
        return [Finding("group_mismatch", name, i, culprits, "", {}, None, details, 0)]
    return []


def non_member_findings(run: Run) -> list[Finding]:
    """One finding per call site (and API) where ranks named a group they are not in (new_group's
    NON_GROUP_MEMBER): the ranks' first such call."""
    by_site: dict[tuple, list] = {}
    for rank, log in sorted(run.ranks.items()):
        if log.non_member:
            api, site, ts = log.non_member[0]
            by_site.setdefault((api, site), []).append((rank, len(log.non_member), log.base_us + ts))
    out = []
    for (api, site), hits in by_site.items():
        first = run.ranks[hits[0][0]]
        outside = [list(c.ranks) for c in first.creations if c.op in ("new", "split") and not c.member and c.ranks]
        details = {"api": api, "site": site, "count": max(n for _, n, _ in hits), "outside": outside[:4]}
        out.append(Finding("non_member_call", "?", 0, [r for r, _, _ in hits], "", {}, None, details,
                           min(t for _, _, t in hits)))
    return sorted(out, key=lambda f: f.time)


def _ev(e) -> str:
    if e is None:
        return "nothing (its sequence ended)"
    label = f" [{e.label}]" if e.label else ""
    return f"{e.describe()}{label} at {e.where()}"


def _ddp_sync_counts(run: Run, f: Finding, e) -> str:
    """For a skipped or extra DDP gradient all-reduce: how many each rank issued in the group,
    which tells uneven inputs or a rank-dependent no_sync() from a one-off skipped call."""
    if e is None or e.sig.role != "gradient bucket":
        return ""
    if any(run.ranks[r].state in ("raised", "crashed") for r in f.events):
        return ""  # the counts differ because a rank failed, not because of how it iterated
    sigs = {i for i, s in enumerate(run.signatures) if s.role == "gradient bucket"}
    counts = {}
    for r in sorted(f.events)[:16]:
        log = run.ranks[r]
        counts[r] = sum(1 for i in log.group_events(f.group) if log.sig[i] in sigs)
    if len(set(counts.values())) < 2:
        return ""
    per_rank = ", ".join(f"rank {r}: {n}" for r, n in counts.items())
    return (f"; the ranks issued different numbers of DDP gradient all-reduces ({per_rank}): uneven "
            "inputs without join(), or no_sync() / gradient accumulation on some ranks only")


def _end(log) -> str:
    """How a rank's log ended, with the evidence: where a killed rank was, what a rank raised."""
    if log.state == "killed" and log.dump_site is not None:
        return f"killed {where_killed(log)}"
    if log.state == "raised":
        message = (log.exception[1].strip().splitlines() or [""])[0]
        if message.startswith("[") and "] " in message:  # gloo's '[/path/file.cc:78] ' prefix
            message = message.split("] ", 1)[1]
        if len(message) > 120:
            message = message[:119] + "…"
        return f"raised {log.exception[0]}" + (f" ('{message}')" if message else "")
    return log.state


def explain(run: Run, f: Finding) -> str:
    """One paragraph a user can act on."""
    who = f"rank{'s' if len(f.ranks) != 1 else ''} {rank_ranges(f.ranks)}"
    others = sorted(r for r, e in f.events.items() if r not in f.ranks)
    ref = f.expected
    if f.kind == "missing":
        how = "stopped" if f.details.get("stopped") else "skipped it"
        text = (f"{who} {how} before {_ev(ref)} which rank{'s' if len(others) != 1 else ''} "
                f"{rank_ranges(others)} issued as collective #{f.position} of group {f.group}")
        if f.details.get("stopped"):
            text += " (" + ", ".join(f"rank {r}: {_end(run.ranks[r])}" for r in f.ranks) + ")"
        ddp = _ddp_sync_counts(run, f, ref)
        if ddp:
            return text + ddp
        failed = all(run.ranks[r].state in ("raised", "crashed") for r in f.ranks)
        if f.details.get("no_majority") and not failed:  # a rank that failed did not "skip" by design
            text += (f"; with no majority this is the same as rank{'s' if len(others) != 1 else ''} "
                     f"{rank_ranges(others)} issuing one more collective (e.g. uneven inputs)")
        return text
    if f.kind == "extra":
        e = next((f.events[r] for r in f.ranks if f.events.get(r)), None)
        text = (f"{who} issued {_ev(e)} as collective #{f.position} of group {f.group}; "
                f"rank{'s' if len(others) != 1 else ''} {rank_ranges(others) if others else '-'} never did")
        ddp = _ddp_sync_counts(run, f, e)
        if ddp:
            return text + ddp
        if f.details.get("no_majority"):
            text += (f"; with no majority this is the same as rank{'s' if len(others) != 1 else ''} "
                     f"{rank_ranges(others)} skipping it")
        return text
    if f.kind == "order_mismatch":
        e = {r: f.events.get(r) for r in f.ranks}
        threads = {e.thread for e in f.events.values() if e is not None}
        return (f"{who} issued collectives #{f.position}..#{f.position + f.details['window'] - 1} of group "
                f"{f.group} in a different order (permutation {list(f.details['permutation'])} of the "
                f"majority's order); first: {_ev(next(iter(e.values())))} vs {_ev(ref)}"
                + (f"; threads: {', '.join(sorted(threads))}" if len(threads) > 1 else ""))
    if f.kind == "non_member_call":
        d = f.details
        where = f" at {os.path.basename(d['site'][0])}:{d['site'][1]}" if d.get("site") else ""
        times = f" ({d['count']} calls)" if d["count"] > 1 else ""
        groups = (f"; rank {f.ranks[0]} is not in the groups of ranks " + ", ".join(map(str, d["outside"]))
                  if d["outside"] else "")
        return (f"{who} called {d['api']}{where}{times} on a group {'it is not a member' if len(f.ranks) == 1 else 'they are not members'} of: torch skipped it with a warning, so that group misses a member{groups}")
    if f.kind == "group_mismatch":
        c = f.details["creations"]
        parts = "; ".join(f"rank {r}: {v}" for r, v in sorted(c.items()))
        return f"new_group call #{f.details['index']} got different ranks: {parts}"
    if f.kind == "unmatched_p2p":
        d = f.details
        e = next((x for x in f.events.values() if x is not None), None)
        return (f"{_ev(e)}: rank {d['src']} -> rank {d['dst']} message #{f.position} in group {f.group} "
                f"has no matching {d['missing']}")
    if f.kind in ("hang", "deadlock"):
        return hang_text(run, f)
    if f.kind == "split_mismatch":
        pairs = "; ".join(f"rank {s} sends {n} elements to rank {d}, which expects {m}"
                          for s, d, n, m in f.details["pairs"])
        more = f.details["pairs_total"] - len(f.details["pairs"])
        e = next((f.events[r] for r in f.ranks if f.events.get(r)), None)
        return (f"in {_ev(e)} (collective #{f.position} of group {f.group}): {pairs}"
                + (f"; {more} more pair(s)" if more > 0 else ""))
    mine = next((f.events[r] for r in f.ranks if f.events.get(r)), None)
    text = f"{who} issued {_ev(mine)} where rank{'s' if len(others) != 1 else ''} {rank_ranges(others)} issued {_ev(ref)} (collective #{f.position} of group {f.group})"
    if f.details.get("p2p"):
        d = f.details
        text = f"send rank {d['src']} -> rank {d['dst']} #{f.position}: {_ev(f.events.get(d['src']))} vs recv {_ev(f.events.get(d['dst']))}"
    if f.details.get("nccl_note"):
        text += "; " + f.details["nccl_note"]
    return text


def hang_text(run: Run, f: Finding) -> str:
    if f.kind == "deadlock":
        cyc = f.details["cycle"]
        hops = " -> ".join(f"rank {r} ({w})" for r, w in zip(cyc, f.details["waits"]))
        return f"wait-for cycle: {hops} -> rank {cyc[0]}; every rank in it waits for the next one, none can proceed"
    roots = f.details.get("root_causes") or []
    waiting = f.details.get("waiting") or []
    waiters = [r for r in waiting if r not in roots]  # a failed root is inside the collective too
    one = len(waiters) == 1
    text = f"rank{'' if one else 's'} {rank_ranges(waiters)} never completed {'its' if one else 'their'} last collective"
    if not roots and not report_edges(f):
        return text + (f"; they are all inside collective #{f.position} of group {f.group} but issued different "
                       "collectives there (see the first divergence)")
    if roots:
        states = ", ".join(f"rank {r} {_end(run.ranks[r]) if r in run.ranks else 'has no log'}" for r in roots)
        if not waiters:
            return f"no rank completed its last collective: {states}"
        text += f"; {'it waits' if one else 'they wait'} on {states}"
    return text


def report_edges(f: Finding) -> bool:
    return bool(f.details.get("root_causes")) or bool(f.details.get("edges"))
