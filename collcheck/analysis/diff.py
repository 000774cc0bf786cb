"""`analyse(run)`: every group aligned, P2P paired, group creation compared, hang analysed."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from ..base import collector
from ..model import Run, Sequences, rank_ranges
from .agree import agreeing
from .align import align_group
from .chains import chain_findings
from .explain import better_fix, explain
from .findings import Finding
from .hang import HangAnalysis, abort_text, analyse_hang, hang_findings
from .p2p import match_p2p
from .pipeline import blame_microbatch_counts
from .source import ProgramSource
from .splits import split_findings
from .verdicts import SlotVerdict, slot_verdicts


@dataclass
class Report:
    run: Run
    findings: list[Finding]
    hang: HangAnalysis
    counts: dict = field(default_factory=dict)  # group -> collectives per rank (majority)
    sequences: Sequences | None = None  # the slots and channels the findings count in

    @property
    def verdict(self) -> str:
        kinds = {f.kind for f in self.findings}
        if "deadlock" in kinds:
            return "deadlock"
        if self.aborted:
            return "aborted"
        if "hang" in kinds or (self.hang.inside and not self.hang.in_flight_only):
            return "hang"
        if self.findings:
            return "mismatch"
        return "incomplete" if self.run.unchecked else "clean"

    @property
    def aborted(self) -> str | None:
        """What the ranks did when the job ended without anyone waiting for a timeout or a kill
        (gloo fails a collective whose peer exited or crashed): the job aborted, it did not hang."""
        return abort_text(self.hang) if any(f.kind == "hang" for f in self.findings) else None

    @property
    def first(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @cached_property
    def verdicts(self) -> dict[tuple, SlotVerdict]:
        """(group, position, src, dst) -> who is out of step there (analysis/verdicts.py): what
        every view marks, never a vote of its own."""
        return slot_verdicts(self.findings)


def analyse(run: Run, source_root: str | None = None, read_source: bool = True) -> Report:
    """Every finding of the run (the cycle collector paused meanwhile: base/collector.py).
    `read_source`: ask the program's source who took a branch where no majority says
    (analysis/source.py; `source_root`: where the recorded files are here)."""
    with collector.paused():
        return _analyse(run, ProgramSource(run, source_root) if read_source else None)


def _analyse(run: Run, source) -> Report:
    sequences = Sequences(run)
    hang = analyse_hang(run, sequences)
    findings: list[Finding] = []
    counts = {}
    cut_short = frozenset(r for r, s in hang.states.items() if s.state in ("crashed", "killed", "dumped"))
    # a rank still running may yet issue what the others did: its sequence has not ended
    unended = hang.inside | {r for r, s in hang.states.items() if s.state == "running"}
    findings += group_creation_findings(run)
    noted = set(run.warnings)
    a2a = any(log.a2a for log in run.ranks.values())  # (split sizes to check: all_to_all_single only)
    quiet = {} if a2a else agreeing(run, sequences)  # groups with nothing to find, found at once
    for name in run.group_names():
        if name in quiet:
            counts[name] = quiet[name]
            continue
        seqs = sequences.group(name)
        counts[name] = _usual_length(seqs)
        aligned = align_group(run, seqs, unended, cut_short, source)
        first = min((f.position for f in aligned), default=None)
        aligned = chain_findings(run, seqs, seqs.members, first, source) + aligned
        _note_cut(run, seqs, noted)
        findings += aligned
        if a2a:
            findings += split_findings(run, seqs, min((f.position for f in aligned), default=None))
    note = source.note() if source is not None else None
    if note is not None:
        run.warnings.append(note)
    p2p_findings = match_p2p(run, sequences)
    if p2p_findings:  # clocks of different processes cannot order them among themselves
        first = min(f.time for f in p2p_findings)
        for f in p2p_findings:
            f.time = first
    findings += p2p_findings
    blame_microbatch_counts(run, p2p_findings)
    divergences = sorted(findings, key=lambda f: (f.time, f.group, f.position, f.ranks))
    hangs = hang_findings(run, hang)
    if hang.in_flight_only and not divergences:
        hangs = []
        _note_in_flight(run, hang)
    # calls torch skipped on non-members explain what follows; alone they changed nothing
    skipped = non_member_findings(run) if divergences or hangs else []
    if divergences and hangs and hangs[0].kind == "hang":
        _blame_divergence(hangs[0], divergences[0], hang)
    findings = skipped + divergences + hangs
    for f in findings:
        if f.kind not in ("group_mismatch", "non_member_call") and not f.details.get("p2p"):
            f.start = sequences.group(f.group).start
        f.message = explain(run, f)
        fix = better_fix(run, f, bool(divergences))
        if fix:
            f.details["fix"] = fix
    return Report(run, findings, hang, counts, sequences)


def _usual_length(seqs) -> int:
    """The number of collectives most members issued on the group."""
    lengths = {len(s) for s in seqs.seq.values()}
    if len(lengths) <= 1:
        return next(iter(lengths), 0)
    return Counter(len(s) for s in seqs.seq.values()).most_common(1)[0][0]


def _note_cut(run: Run, seqs, noted: set) -> None:
    """Say from where a group could be checked (capped logs) and how far on ranks whose logs lost
    some of its collectives or whose recording stopped (`noted`: the run's warnings so far, as a set)."""
    notes = []
    if seqs.start:
        why = ("the ranks' Flight Recorder buffers wrapped" if run.source == "flight-recorder"
               else "capped logs deleted their oldest segments")
        notes.append(f"group {seqs.name}: checked from #{seqs.start} ({why}; every member kept the collectives from there)")
    if seqs.open:
        members = set(run.group_members(seqs.name))
        cut: dict[tuple, list[int]] = {}  # (slots kept, recording stopped) -> ranks
        for r in sorted(seqs.open):
            if r in members or r in seqs.index:
                cut.setdefault((len(seqs.index.get(r, ())), run.ranks[r].stopped is not None), []).append(r)
        for (k, stopped), ranks in sorted(cut.items()):
            one = len(ranks) == 1
            why = (f"{'its' if one else 'their'} recording stopped there" if stopped
                   else f"{'its log' if one else 'their logs'} lost collectives after that")
            notes.append(f"group {seqs.name}: rank{'' if one else 's'} {rank_ranges(ranks)} checked up to #{k} only ({why})")
    for note in notes:
        if note not in noted:
            noted.add(note)
            run.warnings.append(note)


def _note_in_flight(run: Run, hang: HangAnalysis) -> None:
    """Collectives in flight on every member at a dump are no divergence: say so, not 'clean'."""
    slots = sorted({(e.group, e.position) for r in hang.inside for e in hang.states[r].blocked})
    where = ", ".join(f"#{p} of group {g}" for g, p in slots[:4])
    run.warnings.append(
        f"at the {'snapshot' if run.running else 'dump'}, rank(s) {rank_ranges(sorted(hang.inside))} were inside "
        f"{where}, which every member had "
        "enqueued: no rank is missing from it. A snapshot of a running job, or a hang below the calls (network, "
        "the communication library, a device) that the sequences cannot show")


def _blame_divergence(hang_finding: Finding, first: Finding, hang: HangAnalysis) -> None:
    """Ranks that crashed or failed inside a collective (gloo's size check) are the hang's root
    causes but the first divergence's victims: the hang is blamed on that divergence's culprits."""
    roots = hang_finding.details.get("root_causes") or []
    failed = all(hang.states[r].state in ("crashed", "collective-failed") for r in roots)
    if roots and failed and not set(roots) & set(first.ranks):
        hang_finding.ranks = list(first.ranks)
        hang_finding.details["victims_of"] = {"kind": first.kind, "ranks": list(first.ranks)}


def group_creation_findings(run: Run) -> list[Finding]:
    """The i-th new_group/split_group must name the same ranks on every rank."""
    made: dict[int, list] = {}  # id of a creations list -> its new/split ones (ranks of one kind share one)
    seqs = {}
    for r, log in run.ranks.items():
        key_ = id(log.creations)
        if key_ not in made:
            made[key_] = [c for c in log.creations if c.op in ("new", "split")]
        seqs[r] = made[key_]

    def key(c):  # members, and the user's name for the group when given (group_desc)
        return (c.ranks, c.desc)

    if len({tuple(key(c) for c in s) for s in {id(s): s for s in seqs.values()}.values()}) <= 1:
        return []
    n = max(len(s) for s in seqs.values())
    for i in range(n):
        # (a rank still running has not created it yet: nothing to compare)
        at = {r: (key(s[i]) if i < len(s) else None) for r, s in seqs.items() if i < len(s) or not run.ranks[r].running}
        if len(at) < 2:
            continue
        counts = Counter(at.values())
        if len(counts) == 1:
            continue
        ref = max(counts.items(), key=lambda kv: (kv[1], kv[0] is not None, -min(r for r, v in at.items() if v == kv[0])))[0]
        culprits = sorted(r for r, v in at.items() if v != ref)
        name = next((s[i].name for s in seqs.values() if i < len(s) and key(s[i]) == ref and s[i].name), "?")
        details = {"creations": {r: ({"ranks": list(v[0]) if v[0] else None, "desc": v[1]} if v is not None else None)
                                 for r, v in at.items()},
                   "sites": {r: s[i].site for r, s in seqs.items() if i < len(s)}, "index": i}
        # (sorted first, at time 0: what follows on that group is its consequence; `issued`: when
        # the last rank created it)
        details["issued_us"] = max((run.ranks[r].base_us + s[i].ts for r, s in seqs.items() if i < len(s)), default=0)
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
