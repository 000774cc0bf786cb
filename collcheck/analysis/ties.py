"""No majority at a divergence: which camp of ranks is out of step (blame.py's rules on the
aligner's sequences), and the ranks that issued a collective while the other members wait in
another group (a rank-only branch, a missing `group=`)."""

from __future__ import annotations

from bisect import bisect_right

from ..knowledge.frameworks import split_chain
from ..model import group_label
from . import blame
from .findings import field_mismatch

# what a call changed into another one is found as (findings.field_mismatch): a branch may explain it
CHANGED = ("op_mismatch", "shape_mismatch", "dtype_mismatch", "reduce_op_mismatch", "root_mismatch")


class Ties:
    """Reads one group's aligner (align._Aligner): its sequences, positions and findings."""

    def __init__(self, aligner, source=None):
        self.al = aligner
        self.source = source  # the program's source (analysis/source.py), or None

    def out_of_step(self, live: dict[int, int], ended: list[int]) -> bool:
        """Ranks that issued a collective here while the other members wait in another group:
        when the loop each rank runs (all its groups) predicts the others' waits and not this
        call, this call is the one out of step (a rank-only branch, a missing `group=`): an extra
        collective of its issuers. False when the loops do not say so (a consequence, as before)."""
        issuers = sorted(live)
        if len(issuers) > 64 or len(ended) > 64:
            return False
        details = {}
        hint = self._group_hint(issuers)
        if hint:
            details["group_hint"] = hint
        if self._same_call_elsewhere(live, ended):
            elsewhere = sorted({self._last(r).group for r in ended})
            details["blame"] = ("the other members issued the same call at the same point on "
                                f"{', '.join(group_label(self.al.run, g) for g in elsewhere)}: this one was issued on "
                                "the wrong group")
        elif all(self._in_step(r, self.al.index[r][self.al.pos[r]]) is False for r in issuers) and all(
                self._in_step(r, len(self.al.run.ranks[r].sig) - 1) for r in ended):
            details["blame"] = "its loop never issued this call here, while the other members wait where their loops go on"
        else:
            return False
        # where the other members wait (their last call, on another group): event index per rank
        details["waiting_in"] = {r: len(self.al.run.ranks[r].sig) - 1 for r in ended[:16]}
        self.al.add("extra", issuers, None, details=details)
        for r in issuers:
            self.al.pos[r] = len(self.al.seq[r])
        return True

    def _last(self, rank: int):
        log = self.al.run.ranks[rank]
        return log.event(len(log.sig) - 1)

    def _same_call_elsewhere(self, live: dict[int, int], ended: list[int]) -> bool:
        """Every waiting member's last call has the issuers' signature, on another group: `if
        leader: all_reduce(x) else: all_reduce(x, group=tp)`."""
        if len(set(live.values())) != 1:
            return False
        sig = next(iter(live.values()))
        for r in ended:
            log = self.al.run.ranks[r]
            if not len(log.sig) or log.sig[-1] != sig:
                return False
            group = self._last(r).group
            # the larger group is the default one taken by mistake (the others' is their subgroup)
            if group == self.al.name or len(self.al.run.group_members(group)) >= len(self.al.members):
                return False
        return True

    def _group_hint(self, ranks: list[int]) -> str | None:
        """The group whose members are exactly these ranks, when it is not this one: they may have
        meant it (a collective called without `group=`)."""
        if len(ranks) < 2:
            return None
        return next((name for name in self.al.run.group_index.named_by_members(tuple(ranks)) if name != self.al.name),
                    None)

    def _in_step(self, rank: int, i: int) -> bool | None:
        """Whether the rank's event i is the call its own loop (every group) issues there; None:
        no loop seen."""
        log = self.al.run.ranks[rank]
        if not 0 <= i < len(log.sig):
            return None
        lo = max(0, i - blame.HISTORY)
        idx = range(lo, i + 1)
        tokens = list(zip(zip(log.gid[lo:i + 1], log.sig[lo:i + 1]), log.chains_of(idx, len(idx))))
        camp = blame.Camp([rank], tokens, i - lo, False, frozenset(), frozenset(), self._frames,
                          self._step_starts(log, idx))
        expected = camp.expected()
        return None if expected is None else expected == camp.call

    def by_alignment(self, live: dict[int, int], kinds: dict):
        """No majority between two calls: the camps' sequences aligned (blame.py) say which camp
        left the common path; None when there are more than two camps or no rule decides. A
        permutation stays one; a changed call after which the sequences line up stays a changed
        call (the alignment only says whose)."""
        camps: dict[int, list[int]] = {}
        for r, s in sorted(live.items()):
            camps.setdefault(s, []).append(r)
        if len(camps) != 2 or len(kinds) != 1:
            return None
        ((kind, extra), _), = kinds.items()
        a, b = camps.values()
        if kind == "order_mismatch":  # a permutation stays one, unless a rank skipped the rest of its step
            verdict = blame.skipped_rest_of_step(self._camp(a), self._camp(b))
            if verdict is None:
                return None
            culprits, others = (a, b) if verdict.culprit == 0 else (b, a)
            return {("missing", (("span", 1), ("blame", self._skipped_text(culprits[0], others[0], verdict)))):
                    culprits}, others[0], culprits
        camps = self._camp(a), self._camp(b)
        told = self.read_source(camps[0].call, camps[1].call)
        if told is None and self._user_call_against_torch(a[0], b[0]):
            return None  # the user's own call where torch issued one: the user's is the odd one (_rank_key)
        # a changed call: the sequences go on after the slot and line up again (a hang right there
        # lines up nothing), or the two calls completed together (under NCCL they ran as one)
        changed = kind not in ("missing", "extra") and (dict(extra).get("silent") or (
            self.al.sig(a[0], 1) is not None and self.al.sig(b[0], 1) is not None
            and self.al.agreement(b[0], 1, a[0], 1) >= blame.ALIGNED))
        verdict = blame.settle(*camps, changed)
        if told is not None:  # the program's source beats the trace's rules
            culprit = told.culprit(self.al.run.world)
            kind = told.kind(culprit)
            span = verdict.span if verdict and (verdict.culprit, verdict.kind) == (culprit, kind) else 1
            verdict = blame.Verdict(culprit, kind, told.rule(culprit), span)
        if verdict is None:
            return None
        culprits, others = (a, b) if verdict.culprit == 0 else (b, a)
        ref_rank = others[0]
        # a changed call stays one where the two calls ran as one (silent); else the source says
        # which it was: a branch entered (extra) or a call skipped (missing)
        if (changed and (told is None or dict(extra).get("silent"))) or verdict.kind is None:
            kind = field_mismatch(self.al.run.signatures[self.al.sig(culprits[0])], self.al.run.signatures[self.al.sig(ref_rank)])
            extra = tuple(x for x in extra if x[0] == "silent")
        else:
            kind, extra = verdict.kind, (("span", verdict.span),)
        extra += (("blame", verdict.rule), ("decided_by", "source" if told is not None else "trace"))
        if told is not None:
            extra += (("condition", told.condition),)
        return {(kind, extra): culprits}, ref_rank, culprits

    def with_source(self, kinds: dict, culprits: list[int], ref_rank: int) -> dict:
        """A majority named the culprits of a changed (another op, size, dtype, reduce op or root),
        skipped or extra call: the program's source says which the culprits did (entered a
        branch: extra; skipped the call the others made under a condition: missing) and quotes
        the condition."""
        ((kind, extra), ranks), = kinds.items()
        if kind not in CHANGED + ("missing", "extra") or dict(extra).get("silent"):
            return kinds
        told = self.read_source(self._token(culprits[0]), self._token(ref_rank))
        if told is None:
            return kinds
        extra = tuple(x for x in extra if x[0] != "span") + (
            ("blame", told.rule(0)), ("decided_by", "majority"), ("condition", told.condition))
        return {(told.kind(0), extra): ranks}

    def _token(self, r: int) -> tuple | None:
        """(signature id, chain id) of rank r's call at its position, None past its end."""
        p, idx = self.al.pos[r], self.al.index[r]
        if p >= len(idx):
            return None
        return self.al.seq[r][p], self.al.run.ranks[r].chains_of(idx[p:p + 1], 1)[0]

    def read_source(self, a, b):
        """What the program's source says of two calls' tokens (signature, chain id): a Reading
        (analysis/source.py), or None."""
        if self.source is None or a is None or b is None:
            return None
        return self.source.read(self._frames(a[1]), self._frames(b[1]), self.al.run.world)

    def _skipped_text(self, culprit: int, other: int, verdict: blame.Verdict) -> str:
        """'it skipped the FSDP2 backward of step 2 (...)': the phase of the call it skipped (the
        others' label) and the step, counted by its optimizer's steps."""
        expected, mine = self.al.event(other), self.al.event(culprit)
        phase = expected.label.partition(": ")[0] if expected and expected.label and ": " in expected.label else None
        log = self.al.run.ranks[culprit]
        step = sum(1 for t, _ in log.steps if t < mine.t_issue - log.base_us) if mine and log.steps else None
        if phase is None or step is None:
            return verdict.rule
        return (f"it skipped the {phase} of step {step} ({blame.calls_text(verdict.span)} that its earlier steps "
                "issued from here on) and began the next step")

    def _user_call_against_torch(self, a: int, b: int) -> bool:
        """One side's call is torch's own (a role: DDP's buckets, join()'s shadows), the other the
        user's own collective (no framework on its chain either): a user's barrier meeting DDP's
        join() all-reduce is the user's to fix, whatever the loops say."""
        ea, eb = self.al.event(a), self.al.event(b)
        if ea is None or eb is None or (ea.sig.role is None) == (eb.sig.role is None):
            return False
        user = ea if ea.sig.role is None else eb
        return not user.chain or split_chain(user.chain).call is None

    def _camp(self, ranks: list[int]) -> blame.Camp:
        r = ranks[0]
        p, seq, log = self.al.pos[r], self.al.seq[r], self.al.run.ranks[r]
        lo, hi = max(0, p - blame.HISTORY), min(len(seq), p + blame.MAX_EDIT + blame.ALIGNED + 1)
        idx = self.al.index[r][lo:hi]
        tokens = list(zip(seq[lo:hi], log.chains_of(idx, len(idx))))
        complete = hi == len(seq) and r not in self.al.cut_short and r not in self.al.open
        chains_ever = frozenset().union(*(self.al.run.ranks[x].chain_set for x in ranks[:16]))
        sites_ever = frozenset(self.al.run.sites[i] for x in ranks[:16] for i in self.al.run.ranks[x].site_set)
        return blame.Camp(ranks, tokens, p - lo, complete, chains_ever, sites_ever, self._frames,
                          self._step_starts(log, idx[:p - lo + 1]))

    @staticmethod
    def _step_starts(log, idx) -> list[int]:
        """Where in `idx` a training step began: the first call after each optimizer step."""
        if not log.steps or not len(idx):
            return []
        issued = [log.event(i).t_issue - log.base_us for i in idx]
        first, last = issued[0], issued[-1]
        return sorted({bisect_right(issued, t) for t, _ in log.steps if first <= t <= last})

    def _frames(self, chain_id: int) -> tuple:
        return self.al.run.chains[chain_id] if 0 < chain_id < len(self.al.run.chains) else ()
