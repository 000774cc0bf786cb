"""Who left the common path when no majority says so: two ranks, or two equal camps.

A vote at the first differing slot cannot tell two ranks apart, and can name the victim (the
rank whose next call is normal) instead of the rank that took a branch. The camps' sequences are
aligned the way `diff` aligns two files, over tokens (signature, call chain), and read as the
program they come from: a training loop. The rules, in order (the finding says which decided):

1. Edit script. When the sequences go on after the divergence, one camp carries k calls the
   other lacks. The k calls repeat the loop's last iteration: the longer camp ran one more
   (uneven data). Otherwise the common history decides: a loop that always issued them there
   means the shorter camp skipped them; calls the loop never issued there are the longer camp's.
2. A changed call. Both camps issue a call from the same chain with different signatures: the
   camp whose signature differs from that chain's earlier calls changed it.
3. One more iteration. One camp goes on with the loop (its call is the one the loop issues next)
   while the other leaves the frame the loop runs in for a call never issued before: the loop ran
   longer on the first camp (one more batch), which is out of step.
4. The loop. The common history predicts the next call: the camp that issued something else
   broke the pattern (a skipped backward, an early stop, a branch).
5. Never seen. A call from a chain the other camp never runs (a checkpoint save, an `if rank ==
   0:` branch) marks the camp that took a branch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..knowledge.frameworks import framework_call, package_of

HISTORY = 1024  # calls before the divergence read for the loop's pattern
LONGEST_SUFFIX = 64  # longest repeated run compared when predicting the next call
MIN_MATCH = 4  # calls that must recur in one order before the history counts as a loop
RECENT = 128  # latest earlier occurrences of the last call compared when predicting the next one
MAX_EDIT = 64  # longest run of calls one camp can carry more than the other
ALIGNED = 4  # calls that must line up after an edit for the edit to explain the divergence


@dataclass(frozen=True)
class Verdict:
    """The camp out of step (an index into the camps), the kind it did ("extra": it issued
    calls the other did not; "missing": it skipped some; None: it changed a call), how many calls
    (`span`) and the rule that decided, as a sentence for the finding."""

    culprit: int
    kind: str | None
    rule: str
    span: int = 1


class Camp:
    """One side of the divergence, read through its first rank: its tokens (signature id, chain
    id) from HISTORY calls back to MAX_EDIT + ALIGNED calls ahead, and the chains it ever ran."""

    def __init__(self, ranks: list[int], tokens: list[tuple], at: int, complete: bool, chains_ever: frozenset,
                 sites_ever: frozenset, frames, steps: list[int] = ()):
        self.ranks = ranks
        self.steps = [s for s in steps if 0 < s <= at]  # where a training step began (after an optimizer step)
        self.tokens = tokens  # tokens[at] is the call in the divergent slot
        self.at = at
        self.complete = complete  # the tokens reach the end of the camp's sequence, and nothing was cut off
        self.chains_ever = chains_ever  # every chain the camp's ranks issued a collective from, on any group
        self.sites_ever = sites_ever  # and every call site (file, line, function)
        self.frames = frames  # chain id -> the chain's frames (file, line, function), outermost first

    @property
    def history(self) -> list[tuple]:
        return self.tokens[:self.at]

    def ahead(self, k: int = 0) -> list[tuple]:
        return self.tokens[self.at + k:]

    @property
    def call(self) -> tuple | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def last_step(self) -> tuple[list, list] | None:
        """(the last whole training step's calls, the calls of the step under way), when the
        optimizer's steps delimit them and the step under way starts like the last one."""
        if len(self.steps) < 2:
            return None
        last, partial = self.tokens[self.steps[-2]:self.steps[-1]], self.tokens[self.steps[-1]:self.at]
        return (last, partial) if last and partial == last[:len(partial)] else None

    def expected(self) -> tuple | None:
        """The call the loop issues next: the last training step's call at this point of the step
        (the optimizer's steps delimit the loop, whatever the first steps did differently), else
        what the history's recurrence predicts."""
        step = self.last_step()
        if step is None:
            return predict(self.history)
        last, partial = step
        return last[len(partial)] if len(partial) < len(last) else last[0]

    def period(self) -> int:
        """How many calls the loop's last iteration has (0: no loop seen)."""
        step = self.last_step()
        return len(step[0]) if step is not None else _period(self.history)


def skipped_rest_of_step(a: Camp, b: Camp) -> Verdict | None:
    """Both camps are in the same training step; one issues the step's next call, the other
    the first call of a step: it skipped the rest of its step (a backward skipped after a
    non-finite loss) and began the next one."""
    for keeps, skips, index in ((a, b, 1), (b, a, 0)):
        mine, theirs = skips.last_step(), keeps.last_step()
        if mine is None or theirs is None or keeps.expected() != keeps.call or mine[1] != theirs[1]:
            continue
        last, partial = mine
        if partial and skips.call == last[0] and skips.expected() != skips.call:
            rest = len(last) - len(partial)
            return Verdict(index, "missing", f"it skipped the rest of its training step ({calls_text(rest)} that its "
                           "earlier steps issued from here on) and began the next step", rest)
    return None


def settle(a: Camp, b: Camp, changed: bool = False) -> Verdict | None:
    """Which of two camps left the common path, or None when no rule decides. `changed`: the
    sequences line up again right after the slot (one call changed, none carried more)."""
    if changed:
        return _changed_call(a, b) or _broke_the_loop(a, b) or _never_seen(a, b)
    return (_edit_script(a, b) or _changed_call(a, b) or skipped_rest_of_step(a, b) or _one_more_iteration(a, b)
            or _one_more_round(a, b)
            or _broke_the_loop(a, b) or _never_seen(a, b) or _passed_by(a, b))


def predict(history: list) -> tuple | None:
    """The call a loop issues next: what followed the latest earlier occurrence of the history's
    longest recurring suffix (for a loop of period p, the call p back); None unless at least
    MIN_MATCH calls recur in that order (a loop, not a coincidence)."""
    j = _recurrence(history)
    return None if j is None else history[j + 1]


def _period(history: list) -> int:
    """How many calls back the loop's last iteration started (0: no loop seen)."""
    j = _recurrence(history)
    return 0 if j is None else len(history) - 1 - j


def _recurrence(history: list) -> int | None:
    """Where the history's longest recurring suffix last ended before its end; None unless the
    history ends in a loop (its last iteration repeats the one before it)."""
    n = len(history)
    if n < 2:
        return None
    last = history[-1]
    candidates = [j for j in range(n - 1) if history[j] == last][-RECENT:]
    m = 1
    while candidates and m < LONGEST_SUFFIX:
        longer = [j for j in candidates if j - m >= 0 and history[j - m] == history[n - 1 - m]]
        if not longer:
            break
        candidates, m = longer, m + 1
    if not candidates:
        return None
    j = candidates[-1]
    # a loop: its last iteration (n - 1 - j calls) repeats the one before, over MIN_MATCH calls at least
    return j if m >= max(MIN_MATCH, n - 1 - j) else None


def _agreement(x: list, y: list, ended_together: bool) -> float:
    """How many calls' signatures agree from here (chains may differ by rank by design: `if rank
    == 0: f() else: g()` around a shared helper); infinite when both end together."""
    n = min(len(x), len(y))
    k = next((i for i in range(n) if x[i][0] != y[i][0]), n)
    return math.inf if k == n and ended_together and len(x) == len(y) else k


def _edit_script(a: Camp, b: Camp) -> Verdict | None:
    """The shortest run of calls one camp carries more than the other after which both line up
    (of two such readings, the one that lines up more calls)."""
    together = a.complete and b.complete
    for k in range(1, MAX_EDIT + 1):
        readings = [(_agreement(longer.ahead(k), shorter.ahead(), together), i, longer, shorter)
                    for i, (longer, shorter) in enumerate(((a, b), (b, a))) if len(longer.ahead()) > k]
        readings = [r for r in readings if r[0] >= ALIGNED]
        if readings:
            _, _, longer, shorter = max(readings, key=lambda r: (r[0], -r[1]))
            return _who_carries(longer, shorter, k, 0 if longer is a else 1)
    return None


def _who_carries(longer: Camp, shorter: Camp, k: int, long_index: int) -> Verdict:
    """Insertion on one camp or deletion on the other: the reading under which the camp's own loop
    is less surprised. Equal surprise: calls that repeat the loop's last iteration are one more
    iteration (the longer camp's: uneven data); otherwise a call the shorter camp runs elsewhere
    was skipped by it, one it never runs was added by the longer."""
    carried = longer.ahead()[:k]
    # where each reading meets the loop: the longer camp at the edit's first call and at the call
    # after it, the shorter camp at the call where the edit would have been
    surprise_long = surprise_short = 0
    p_long, p_short = longer.expected(), shorter.expected()
    if p_long is not None and p_short is not None:
        surprise_long = int(p_long != carried[0]) + _misses(longer.history + carried, longer.ahead()[k])
        surprise_short = int(p_short != shorter.call)
    short_index = 1 - long_index
    what = calls_text(k)
    if surprise_long > surprise_short:
        return Verdict(long_index, "extra", f"it issued {what} where its loop never did before", k)
    if surprise_short > surprise_long:
        return Verdict(short_index, "missing", f"it skipped {what} that its loop issued there every time before", k)
    if len(longer.history) >= k and longer.history[-k:] == carried:
        return Verdict(long_index, "extra", f"it ran {what} more of its loop than the others (one more iteration: "
                       "uneven data per rank?)", k)
    if _site(longer, carried[0]) in shorter.sites_ever:
        return Verdict(short_index, "missing", f"it skipped {what} from a line it runs elsewhere", k)
    return Verdict(long_index, "extra", f"it issued {what} from a line the others never run", k)


def _site(camp: Camp, token: tuple):
    frames = camp.frames(token[1])
    return frames[-1] if frames else None


def calls_text(k: int) -> str:
    return f"{k} collective{'s' if k != 1 else ''}"


def _misses(history: list, token: tuple) -> int:
    """1 when the loop in the history predicts another call than `token`, else 0."""
    return int(predict(history) not in (None, token))


def _changed_call(a: Camp, b: Camp) -> Verdict | None:
    """Both calls from one line: the one that differs from what that line issued before changed."""
    x, y = a.call, b.call
    if x is None or y is None or x[0] == y[0] or _site(a, x) is None or _site(a, x) != _site(b, y):
        return None
    before = {t[0] for t in a.history if t[1] == x[1]} | {t[0] for t in b.history if t[1] == y[1]}
    if x[0] in before and y[0] not in before:
        return Verdict(1, None, "its call differs from what that line issued before on every rank")
    if y[0] in before and x[0] not in before:
        return Verdict(0, None, "its call differs from what that line issued before on every rank")
    return None


def _one_more_iteration(a: Camp, b: Camp) -> Verdict | None:
    """One camp goes on with the loop, the other leaves it for a framework's end-of-loop call never
    issued before (an epoch's end, an evaluation): the ranks ran different numbers of iterations.
    The one that went on ran more (uneven data), unless the framework says the other ended
    training there (an early stop on one rank)."""
    for goes_on, leaves, index in ((a, b, 0), (b, a, 1)):
        x, y = goes_on.call, leaves.call
        if x is None or y is None or goes_on.expected() != x or y in leaves.history:
            continue
        ended = framework_call(leaves.frames(y[1]))
        # (a call of the program's own after the loop's lines may as well be a branch in the loop's
        # body, `if rank == 0: log(...)`: only a framework's end-of-loop call says the loop ended)
        if ended is None or not ended.after_loop or not _leaves_the_loop(goes_on, y):
            continue
        if ended.ends_training:
            return Verdict(1 - index, "missing", f"it ended training ({ended.words}) while the others went on with "
                           "the next step: a stop decided on some ranks only")
        return Verdict(index, "extra", "it went on with another iteration of the loop while the others left it: "
                       "the ranks ran different numbers of iterations (uneven data per rank?)")
    return None


def _one_more_round(a: Camp, b: Camp) -> Verdict | None:
    """After the last training step one camp starts the next step while the other starts over
    what it did since that step (one more metric reduction at an epoch's end): the other did
    one more round of it."""
    for again, moves_on, index in ((a, b, 0), (b, a, 1)):
        step, other = again.last_step(), moves_on.last_step()
        since = again.tokens[again.steps[-1]:again.at] if again.steps else []
        if step is not None or other is not None or not since or len(moves_on.steps) < 2:
            continue
        next_step = moves_on.tokens[moves_on.steps[-2]]
        if again.call == since[0] and moves_on.call == next_step and again.call != next_step:
            return Verdict(index, "extra", "after the last training step it started over what it had just done "
                           "while the others went on with the next step (one more round of it)")
    return None


def _leaves_the_loop(camp: Camp, token: tuple) -> bool:
    """The call comes from the code after the loop: its chain leaves the frames the loop's calls
    share at a line past theirs (a `while` loop's `on_advance_end()` after its `advance()`, the
    barrier after a `for batch in loader:`)."""
    period = camp.period()
    chains = [camp.frames(t[1]) for t in camp.history[-period:]] + [camp.frames(camp.call[1])] if period else []
    mine = camp.frames(token[1])
    if not chains or not mine or any(not c or None in c for c in chains) or None in mine:
        return False
    depth = 0  # frames (file, function) every call of the loop shares, outermost first
    while all(len(c) > depth and c[depth][::2] == chains[0][depth][::2] for c in chains):
        depth += 1
    shared = 0  # of those, the ones the call shares
    while shared < min(depth, len(mine)) and mine[shared][::2] == chains[0][shared][::2]:
        shared += 1
    if shared == 0:
        return False
    at = shared - 1  # the deepest frame the call shares with the loop's: past the loop's lines there?
    return mine[at][1] > max(c[at][1] for c in chains)


def _broke_the_loop(a: Camp, b: Camp) -> Verdict | None:
    """One camp issued the call its loop predicts, the other did not: the other broke the loop,
    by skipping the predicted call (its call is the one after it) or by issuing another."""
    pa, pb = a.expected(), b.expected()
    a_keeps, b_keeps = pa is not None and a.call == pa, pb is not None and b.call == pb
    if a_keeps == b_keeps:
        return None
    culprit = b if a_keeps else a
    expected = pa if a_keeps else pb
    if culprit.call is not None and predict(culprit.history + [expected]) == culprit.call:
        return Verdict(1 if a_keeps else 0, "missing", "it skipped the call its loop issued there every time "
                       "before, and went on with the next")
    return Verdict(1 if a_keeps else 0, "extra", "it issued another call than the one its loop issued there "
                   "every time before")


def _never_seen(a: Camp, b: Camp) -> Verdict | None:
    x, y = a.call, b.call
    x_new = bool(x is not None and x[1] and x[1] not in b.chains_ever)
    y_new = bool(y is not None and y[1] and y[1] not in a.chains_ever)
    if x_new == y_new:
        return None
    return Verdict(0 if x_new else 1, "extra", "it issued a call from a chain the others never run (a branch "
                   "taken on some ranks only)")


def _passed_by(a: Camp, b: Camp) -> Verdict | None:
    """Two calls never issued before, from one function at different lines: the camp further
    along went through the other's line without issuing anything there (`if
    accelerator.is_main_process:` around a gather): the other's call is the extra one."""
    x, y = a.call, b.call
    if x is None or y is None or x in a.history or y in b.history:
        return None
    fx, fy = a.frames(x[1]), b.frames(y[1])
    if not fx or not fy or None in fx or None in fy:
        return None
    for depth in range(min(len(fx), len(fy))):
        if fx[depth][::2] != fy[depth][::2]:
            return None
        if fx[depth][1] != fy[depth][1]:
            behind, chain = (0, fx) if fx[depth][1] < fy[depth][1] else (1, fy)
            # inside a call made at the earlier line, which the others returned from: not two
            # branches of one `if` (each issuing from its own line)
            if len(chain) <= depth + 2 or package_of(chain[depth + 1][0]) is not None:
                return None
            return Verdict(behind, "extra", f"it issued this call inside {chain[depth + 1][2]}() (called from line "
                           f"{chain[depth][1]} of {chain[depth][2]}()), which the others went through without it "
                           "(a branch taken on some ranks only)")
    return None
