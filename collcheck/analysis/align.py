"""Align the members of one group in issue order and classify the first divergences.

Ranks whose sequences are byte-identical are compared once (the common case costs
one hash per rank and group). At a divergence the majority is the reference; with
no majority, a call site that every rank executes outranks one that only some do, then a
torch-internal call outranks a user call, then the lowest rank decides.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter

from ..model import GroupSequences, Run
from .findings import Finding, field_mismatch
from .ties import Ties

# labels of collectives a framework issues on one rank to stand in for the others' (DDP's join():
# the joined rank shadows the others' forward and backward from its `with join()` line)
STAND_IN_LABELS = ("join()",)


def stands_in(ev) -> bool:
    """A call a framework issues to stand in for the others' (join()'s shadows): made from a line
    the others do not run, by design."""
    return ev is not None and ev.label is not None and ev.label.startswith(STAND_IN_LABELS)


LOOKAHEAD = 4  # events compared to tell a skipped collective from a changed one
ORDER_WINDOW = 16  # longest permutation reported as an order mismatch
MAX_FINDINGS_PER_GROUP = 20


def align_group(run: Run, seqs: GroupSequences, waiting: set[int], cut_short: frozenset[int] = frozenset(),
                source=None) -> list[Finding]:
    """Findings for one group; `waiting` are ranks blocked in some collective at the end,
    `cut_short` ranks whose log was ended from outside (crashed, killed while computing), `source`
    the program's source (analysis/source.py), asked first when no majority says who is out of step."""
    members = seqs.members
    if len(members) < 2:
        return []
    seq, empty = seqs.seq, array("I")
    first = seq.get(members[0], empty)
    if all([(s := seq.get(r, empty)) is first or s == first for r in members[1:]]):  # (ranks of a kind share one)
        return []
    return _Aligner(run, seqs, members, waiting, cut_short | frozenset(seqs.open), source).align()


def _agreeing(a: array, i: int, b: array, j: int, most: int) -> int:
    """How many slots a[i:] and b[j:] agree on, up to `most` (compared a block at a time)."""
    n, block = 0, 4096
    while n < most:
        k = min(block, most - n)
        if a[i + n:i + n + k] != b[j + n:j + n + k]:
            while a[i + n] == b[j + n]:
                n += 1
            return n
        n += k
    return most


class _Aligner:
    def __init__(self, run: Run, seqs: GroupSequences, members: list[int], waiting: set[int],
                 cut_short: frozenset[int], source=None):
        self.run = run
        self.name = seqs.name
        self.members = members
        self.seq = {r: seqs.seq.get(r, array("I")) for r in members}
        self.index = {r: seqs.index.get(r, array("I")) for r in members}
        self.pos = {r: 0 for r in members}
        self.waiting = waiting
        self.cut_short = cut_short
        self.open = [r for r in members if r in seqs.open]  # unknown after their last slot (lost)
        self.findings: list[Finding] = []
        self.tie = False
        self.streams = run.on_streams  # NCCL: completed collectives were paired by position
        # no majority: which camp is out of step; not for a Flight Recorder dump, which names none
        # of torch's own calls (join()'s shadows stand in for other ranks' calls unrecognised)
        self.ties = Ties(self, source) if run.source != "flight-recorder" else None

    # -- helpers ---------------------------------------------------------------------
    def sig(self, r: int, offset: int = 0) -> int | None:
        p = self.pos[r] + offset
        s = self.seq[r]
        return s[p] if p < len(s) else None

    def event(self, r: int, offset: int = 0):
        p = self.pos[r] + offset
        idx = self.index[r]
        return self.run.ranks[r].event(idx[p]) if p < len(idx) else None

    def window(self, r: int, start: int, n: int) -> list[int]:
        p = self.pos[r] + start
        return list(self.seq[r][p:p + n])

    def sites_of(self, r: int) -> set:
        return self.run.ranks[r].site_set

    # -- main loop -----------------------------------------------------------------------
    def align(self) -> list[Finding]:
        while len(self.findings) < MAX_FINDINGS_PER_GROUP:
            self.skip_agreed()
            current = {r: self.sig(r) for r in self.members}
            live = {r: s for r, s in current.items() if s is not None}
            if not live or any(current[r] is None for r in self.open):
                break  # (a rank whose log lost the rest of its sequence: nothing to compare with)
            if len(live) == len(self.members) and len(set(live.values())) == 1:
                for r in self.members:
                    self.pos[r] += 1
                continue
            if not self.divergence(current, live):
                break
        return self.findings

    def skip_agreed(self) -> None:
        """Move every member past the slots on which all of them agree, comparing each distinct
        (sequence, position) once: thousands of ranks of a few kinds cost a few slices, not a
        step per rank and slot."""
        cohorts: dict[tuple, tuple] = {}
        for r in self.members:
            seq, p = self.seq[r], self.pos[r]
            cohorts.setdefault((id(seq), p), (seq, p))
        (seq0, p0), *others = cohorts.values()
        n = min(len(seq) - p for seq, p in cohorts.values())
        for seq, p in others:
            n = min(n, _agreeing(seq0, p0, seq, p, n))
        if n > 0:
            for r in self.members:
                self.pos[r] += n

    def reference(self, live: dict[int, int], ended: list[int]) -> tuple[int | None, list[int]]:
        """The majority signature (None = 'no event': the ranks that ended) and the culprits."""
        counts = Counter(live.values())
        options = [(n, s) for s, n in counts.items()] + ([(len(ended), None)] if ended else [])
        best = max(n for n, _ in options)
        tied = [s for n, s in options if n == best]
        if len(tied) > 1:
            tied.sort(key=lambda s: self._rank_key(s, live, ended))
        ref = tied[0]
        culprits = sorted(r for r in self.members if live.get(r) != ref)
        self.tie = len(tied) > 1
        return ref, culprits

    def _rank_key(self, s, live, ended):
        holders = [r for r, v in live.items() if v == s] if s is not None else ended
        if s is None:
            if all(self._left_by_exception(r) for r in ended):
                return (2, 0, 0, min(holders))  # they left the program early: 'ended' never wins
            # 'ended' wins a tie only when the live ranks' call is one the ended ranks never make
            site_known = all(self._site_known(r, ended) for r, v in live.items())
            return (1 if site_known else -1, 0, 0, min(holders))
        # a call from a site the other ranks never execute is the odd one (DCP's save called on rank 0
        # only), whoever issued it; then a torch-internal call outranks a user call (a user's barrier
        # meeting DDP's join all-reduce)
        others = [r for r in self.members if r not in holders and live.get(r) is not None]
        known = all(self._site_known(r, others) or stands_in(self.event(r)) for r in holders)
        role = self.run.signatures[s].role
        return (0, 0 if known else 1, 0 if role is not None else 1, min(holders))

    def _left_by_exception(self, r: int) -> bool:
        """The rank's program raised an exception of its own (none of its collectives pending or
        failed: not a consequence of the divergence), so it stopped where the others went on."""
        log = self.run.ranks[r]
        return log.exception is not None and not log.pending and not log.errors and log.disabled is None

    def _site_known(self, r: int, others: list[int]) -> bool:
        ev = self.event(r)
        if ev is None or ev.site is None:
            return True
        site_id = self.run.site_id(ev.site)
        return all(site_id in self.sites_of(o) for o in others)

    def divergence(self, current: dict, live: dict) -> bool:
        ended = [r for r, s in current.items() if s is None]
        if ended and self.ties and all(r in self.waiting for r in ended) and self.ties.out_of_step(live, ended):
            return True
        ref, culprits = self.reference(live, ended)
        if ref is None:
            if all(r in self.waiting for r in ended):
                return False  # the others are blocked elsewhere (a P2P op, another group): a consequence
            # the majority has stopped: the culprits issued collectives nobody else did
            self.add("extra", culprits, None, details={"after_end": True})
            for r in culprits:
                self.pos[r] = len(self.seq[r])
            return True
        ref_rank = min(r for r, s in live.items() if s == ref)
        if ended and all(r in culprits for r in ended):
            stopped = [r for r in ended if r not in self.waiting]
            if stopped:
                self.add("missing", stopped, ref_rank, details={"stopped": True})
            return False  # what follows is the consequence of ranks that stopped
        kinds = {}
        for r in culprits:
            kinds.setdefault(self.classify(r, ref_rank), []).append(r)
        settled = self.ties.by_alignment(live, kinds) if self.ties and self.tie and not ended else None
        if settled is not None:
            kinds, ref_rank, culprits = settled
        elif self.tie and len(kinds) == 1:
            kinds, ref_rank, culprits = self._settle_tie(kinds, ref_rank, culprits)
        elif self.ties and len(kinds) == 1 and not ended:
            kinds = self.ties.with_source(kinds, culprits, ref_rank)
        for (kind, extra), ranks in sorted(kinds.items(), key=lambda kv: kv[1][0]):
            details = dict(extra)
            if "condition" in details:  # (file, line, text), hashable while the kinds are keyed by it
                details["condition"] = dict(zip(("file", "line", "text"), details["condition"]))
            self.add(kind, ranks, ref_rank, details=details)
        if len(kinds) > 1:
            return False
        ((kind, extra), _ranks), = kinds.items()
        if kind == "missing":
            for r in self.members:
                if r not in culprits:
                    self.pos[r] += dict(extra).get("span", 1)
        elif kind == "extra":
            for r in culprits:
                self.pos[r] += dict(extra).get("span", 1)
        elif kind == "order_mismatch":
            k = dict(extra)["window"]
            for r in self.members:
                self.pos[r] += k
        else:
            for r in self.members:
                self.pos[r] += 1
        return True

    def _settle_tie(self, kinds, ref_rank, culprits):
        """No majority: 'rank A skipped a call' beats 'rank B made an extra call' when A
        makes that call elsewhere (its call site is known to A)."""
        ((kind, _extra), _ranks), = kinds.items()
        others = [r for r in self.members if r not in culprits]
        if kind == "extra" and all(self._site_known(r, others) for r in culprits):
            return {("missing", ()): others}, culprits[0], others
        if kind == "missing" and not self._site_known(ref_rank, culprits):
            return {("extra", ()): others}, culprits[0], others
        return kinds, ref_rank, culprits

    def agreement(self, r: int, r_off: int, ref_rank: int, ref_off: int) -> float:
        """How many signatures of r (from its position + r_off) equal ref_rank's (from its
        position + ref_off) before the first difference; infinite when both end together,
        unless one was cut short: a crashed rank might have issued the rest."""
        a, b = self.seq[r], self.seq[ref_rank]
        i, j = self.pos[r] + r_off, self.pos[ref_rank] + ref_off
        la, lb = max(len(a) - i, 0), max(len(b) - j, 0)
        n = min(la, lb)
        k, step = 0, 16
        while k < n:  # galloping: cheap when the difference is near, linear in C otherwise
            s = min(step, n - k)
            if a[i + k:i + k + s] == b[j + k:j + k + s]:
                k += s
                step *= 2
                continue
            lo, hi = k, k + s  # equal up to lo; the first difference is in [lo, hi)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[i + lo:i + mid] == b[j + lo:j + mid]:
                    lo = mid
                else:
                    hi = mid
            return lo
        if la == lb and r not in self.cut_short and ref_rank not in self.cut_short:
            return math.inf
        return n

    def classify(self, r: int, ref_rank: int) -> tuple[str, tuple]:
        mine, theirs = self.sig(r), self.sig(ref_rank)
        if mine is None:
            return ("missing", ())
        # under NCCL calls that completed together ran as one collective, whatever each rank
        # called them (a barrier with an all-reduce, an int64 with a float64): not a skipped call
        paired = self.streams and self._paired(r, ref_rank)
        silent = (("silent", True),) if paired else ()
        # Each reading of the slot (skipped call, extra call, permuted window, changed call) is
        # judged by how far the sequences agree after it: in a loop, a skipped call also looks
        # like a permutation of one loop body, and a changed call in a run of equal calls also
        # looks like an extra one, but only the right reading lines the rest up.
        missing = self.agreement(r, 0, ref_rank, 1)
        extra = self.agreement(r, 1, ref_rank, 0)
        same = self.agreement(r, 1, ref_rank, 1)
        for k in range(2, ORDER_WINDOW + 1):
            a, b = self.window(r, 0, k), self.window(ref_rank, 0, k)
            if len(a) < k or len(b) < k:
                break
            if Counter(a) == Counter(b):
                # the reading that lines up more events of both ranks wins (the window's
                # k events count, a skipped or extra call's own event counts half)
                if k + self.agreement(r, k, ref_rank, k) <= max(missing, extra):
                    break
                perm = _permutation(b, a)
                return ("order_mismatch", (("window", k), ("permutation", tuple(perm)), *silent))
        if paired:
            return (field_mismatch(self.run.signatures[mine], self.run.signatures[theirs]), silent)
        ahead_missing = missing >= LOOKAHEAD
        ahead_extra = extra >= LOOKAHEAD
        if ahead_missing and missing > extra and missing >= same:
            return ("missing", ())
        if ahead_extra and extra > missing and extra >= same:
            return ("extra", ())
        a, b = self.run.signatures[mine], self.run.signatures[theirs]
        kind = field_mismatch(a, b)
        # Torch-internal calls (DDP, join) are never 'skipped' by a user: keep the mismatch.
        user_only = kind != "op_mismatch" or (a.role is None and b.role is None)
        if user_only and not (ahead_missing or ahead_extra):
            # the sequences end here (a hang or abort followed): call sites decide whether the
            # culprit made a call the others never make (extra) or skipped one (missing)
            others = [x for x in self.members if x != r and self.sig(x) == theirs]
            mine_known = self._site_known(r, others)
            theirs_known = self._site_known(ref_rank, [r])
            if not mine_known and theirs_known:
                return ("extra", ())
            if mine_known and not theirs_known:
                return ("missing", ())
        return (kind, ())

    def _paired(self, r: int, ref_rank: int) -> bool:
        """Both ranks' collectives in this slot completed without an error."""
        return all(e is not None and e.t_done is not None and not e.error
                   for e in (self.event(r), self.event(ref_rank)))

    def _representatives(self, culprits, ref_rank) -> list[int]:
        seen: dict = {}
        for r in self.members:
            seen.setdefault(self.sig(r), r)
        return sorted(set(culprits[:64]) | set(seen.values()) | ({ref_rank} if ref_rank is not None else set()))

    def add(self, kind: str, culprits: list[int], ref_rank: int | None, details: dict) -> None:
        # every member for small groups; for big ones the culprits and one rank per other signature
        shown = self.members if len(self.members) <= 16 else self._representatives(culprits, ref_rank)
        events = {r: self.event(r) for r in shown}
        expected = events.get(ref_rank) if ref_rank is not None else None
        position = self.pos[ref_rank] if ref_rank is not None else min(self.pos[r] for r in culprits)
        times = [e.t_issue for e in events.values() if e is not None]
        if self.tie and kind in ("missing", "extra"):
            details = {**details, "no_majority": True}
        f = Finding(kind, self.name, position, sorted(culprits), "", events, expected, details,
                    min(times) if times else 0)
        if kind == "op_mismatch" and _barrier_vs_scalar_allreduce(events):
            f.details["nccl_note"] = ("under NCCL barrier() is an all-reduce of one element: it would pair "
                                      "silently with this all-reduce (a semantic mismatch)")
        self.findings.append(f)


def _permutation(reference: list[int], actual: list[int]) -> list[int]:
    """For each slot of `actual`, the slot of `reference` holding the same collective."""
    used = [False] * len(reference)
    out = []
    for s in actual:
        for j, t in enumerate(reference):
            if not used[j] and t == s:
                used[j] = True
                out.append(j)
                break
    return out


def _barrier_vs_scalar_allreduce(events) -> bool:
    ops = {e.sig.op: e for e in events.values() if e is not None}
    ar = ops.get("allreduce_")
    return "barrier" in ops and ar is not None and ar.sig.numel == 1

