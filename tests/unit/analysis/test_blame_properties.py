"""Blame by alignment (analysis/blame.py) on training loops: a step of calls repeated, one rank's
step edited. Two ranks have no majority: the loop the program runs must name the edited rank;
with three or more ranks, also for a whole step added or skipped."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.runs import Call, write

from collcheck.analysis.diff import analyse

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAIN = (("/job/train.py", 5, "main"),)  # the loop's frame: every call of the step comes through it
OPS = (("allreduce_", 4), ("allreduce_", 8), ("allgather_", 4), ("broadcast_", 4), ("barrier", 0))


def world(n: int) -> dict:
    return {"0": tuple(range(n))}


@st.composite
def loops(draw):
    """(body, steps): a step of 2-6 calls from distinct lines (even lines: room for an extra call
    between two of them), repeated 4-7 times."""
    n = draw(st.integers(2, 6))
    kinds = draw(st.lists(st.sampled_from(OPS), min_size=n, max_size=n))
    body = [Call(op, size=size, line=10 + 2 * i, reduce_op=0 if op.startswith("allreduce") else None,
                 outer=MAIN, done=True) for i, (op, size) in enumerate(kinds)]
    return body, draw(st.integers(5, 8))


def _hang(calls: list[Call], at: int) -> list[Call]:
    """The rank's calls up to its divergent one, which never completes (the job hangs there)."""
    return calls[:at] + [Call(**{**calls[at].__dict__, "done": False})]


def _culprit(ranks: dict, n: int, hang_at: int | None):
    with tempfile.TemporaryDirectory() as d:
        if hang_at is not None:
            ranks = {r: _hang(c, hang_at) for r, c in ranks.items()}
        run = write(d, world(n), ranks, finished=() if hang_at is not None else None)
        report = analyse(run)
        assert report.findings, "no finding"
        return report.findings[0]


@SETTINGS
@given(loop=loops(), data=st.data())
def test_one_edited_step_on_one_of_two_ranks_blames_that_rank(loop, data):
    """An extra call between two calls of one step, or one call of a step skipped, on a random
    rank; the rest of the run recorded (calls that paired silently) or the job hung right there."""
    body, steps = loop
    k = data.draw(st.integers(3, steps - 2), label="step")
    edited = data.draw(st.integers(0, 1), label="rank")
    hang = data.draw(st.booleans(), label="hang")
    calls = body * steps
    at = k * len(body) + data.draw(st.integers(0, len(body) - 1), label="call")
    added = data.draw(st.booleans(), label="extra")
    if added:
        at += data.draw(st.integers(1, len(body) - 1), label="inside") if at % len(body) == 0 else 0
        new = data.draw(st.booleans(), label="new call")
        extra = (Call("allreduce_", size=777, line=calls[at].line - 1, outer=MAIN) if new
                 else data.draw(st.sampled_from(body), label="repeated"))
        changed = calls[:at] + [extra] + calls[at:]
    else:
        changed = calls[:at] + calls[at + 1:]
    ranks = {edited: changed, 1 - edited: calls}
    # a hang: both ranks stop at the first call that differs (an extra call equal to the one it
    # displaces pairs with it and the ranks go on)
    first = next(i for i, (x, y) in enumerate(zip(changed, calls)) if (x.op, x.size, x.line) != (y.op, y.size, y.line))
    f = _culprit(ranks, 2, first if hang else None)
    assert f.ranks == [edited], (f.kind, f.position, f.ranks, f.details.get("blame"), f.message)
    if not hang:  # the rest lined up: the edit script says what the rank did (or, between calls of one
        # signature, the chains: equal calls paired from different lines)
        assert f.kind == ("extra" if added else "missing") or (
            f.kind == "semantic_mismatch" and f.details.get("chains")), (f.kind, f.message)


@SETTINGS
@given(loop=loops(), data=st.data())
def test_an_edited_step_among_three_or_more_ranks_blames_the_edited_rank(loop, data):
    """Three or four ranks: an extra or skipped call inside a step, or a whole step added or
    skipped, on one rank."""
    body, steps = loop
    n = data.draw(st.integers(3, 4), label="world")
    k = data.draw(st.integers(1, steps - 1), label="step")
    edited = data.draw(st.integers(0, n - 1), label="rank")
    calls = body * steps
    start = k * len(body)
    edit = data.draw(st.sampled_from(("extra call", "skipped call", "extra step", "skipped step")), label="edit")
    if edit == "extra call":
        at = start + data.draw(st.integers(1, len(body) - 1))
        changed = calls[:at] + [Call("allreduce_", size=777, line=calls[at].line - 1, outer=MAIN)] + calls[at:]
    elif edit == "skipped call":
        at = start + data.draw(st.integers(0, len(body) - 1))
        changed = calls[:at] + calls[at + 1:]
    elif edit == "extra step":
        changed = calls[:start] + body + calls[start:]
    else:
        changed = calls[:start] + calls[start + len(body):]
    ranks = {r: (changed if r == edited else calls) for r in range(n)}
    f = _culprit(ranks, n, None)
    assert f.ranks == [edited], (edit, f.kind, f.position, f.ranks, f.message)


ACC = "/venv/lib/python3.11/site-packages/accelerate/"


@pytest.mark.parametrize("after_loop, culprit", [("framework", 0), ("program", 1)])
def test_a_call_past_the_loop_is_the_loop_s_end_only_when_a_framework_says_so(after_loop, culprit):
    """Two ranks: rank 0 starts a 7th step where rank 1 makes a call never made before, from a
    line past the loop's, and the job hangs there. Where that call is accelerate's
    `gather_for_metrics` (an evaluation after the loop), rank 1's loop ended: rank 0 ran one more
    iteration (uneven data). Where it is the program's own, it may as well be a branch in the
    loop's body (`if rank == 1: log(...)`): rank 1 issued a call its loop never issued there."""
    body = [Call("allreduce_", size=8, line=12, outer=(("/job/train.py", 30, "main"),))]
    if after_loop == "framework":
        after = Call("allgather_", size=4, line=355, func="_gpu_gather_one", done=False,
                     file=ACC + "utils/operations.py",
                     outer=(("/job/train.py", 40, "main"), (ACC + "accelerator.py", 3151, "gather_for_metrics")))
    else:
        after = Call("allgather_", size=4, line=40, func="main", done=False)
    ranks = {0: body * 7 + [Call(**{**body[0].__dict__, "done": False})], 1: body * 6 + [after]}
    f = _culprit(ranks, 2, None)
    assert (f.kind, f.position, f.ranks) == ("extra", 6, [culprit]), (f.kind, f.position, f.ranks, f.message)
    if after_loop == "framework":
        assert "another iteration" in f.message, f.message


def test_equal_calls_from_a_chain_never_met_on_are_a_semantic_mismatch():
    """Two ranks all-gather one int64 each step through a framework's helper; rank 1 stops
    early and all-gathers its end-of-training count, one int64 too, from another helper: the
    slot pairs two calls for different purposes, silently. Rank 1 reached it by a chain the
    ranks never met on: a semantic mismatch there, not one slot later where the ops differ."""
    lib = "/venv/lib/python3.11/site-packages/transformers/"
    step = [Call("allgather_", size=1, line=355, func="_gpu_gather_one", file=ACC + "utils/operations.py",
                 outer=(("/job/train.py", 76, "main"), (lib + "trainer.py", 1600, "_inner_training_loop"),
                        (lib + "trainer.py", 2350, "_get_num_items_in_batch"), (ACC + "accelerator.py", 3107, "gather"))),
            Call("allreduce_", size=8, line=90, outer=(("/job/train.py", 76, "main"), (lib + "trainer.py", 1610, "training_step")))]
    end = Call("allgather_", size=1, line=290, func="distributed_broadcast_scalars", file=lib + "trainer_pt_utils.py",
               outer=(("/job/train.py", 76, "main"), (lib + "trainer.py", 2017, "_finalize_training"),
                      (lib + "trainer.py", 4217, "store_flos")))
    ranks = {0: step * 4, 1: step * 2 + [end]}
    f = _culprit(ranks, 2, None)
    assert (f.kind, f.position, f.ranks) == ("semantic_mismatch", 4, [1]), (f.kind, f.position, f.ranks, f.message)


def _fsdp(kind: str, module: int, phase: str, line: int, step_after: bool = False) -> Call:
    op, role = (("allgather_", "FSDP unshard all-gather") if kind == "gather" else
                ("reduce_scatter_", "FSDP gradient reduce"))
    return Call(op, size=36, line=line, reduce_op=0 if kind == "reduce" else None, role=f"{role} of {module}",
                label=f"FSDP2 {phase}: {role} of {module}", outer=MAIN, step_after=step_after)


def test_a_rank_that_skips_a_backward_is_named_by_the_step_and_phase_it_skipped():
    """FSDP2, two layers of one shape: a step all-gathers both in forward, again in backward, and
    reduce-scatters both; the optimizer steps after it. At step 2 rank 1 skips backward and the
    optimizer step (a non-finite loss): its next forward's all-gathers pair, same size, with rank
    0's backward ones. One rank skipped a backward, not two calls swapped."""
    forward = [_fsdp("gather", 0, "forward", 26), _fsdp("gather", 2, "forward", 26)]
    backward = [_fsdp("gather", 2, "backward", 33), _fsdp("gather", 0, "backward", 33),
                _fsdp("reduce", 2, "backward", 33), _fsdp("reduce", 0, "backward", 33, step_after=True)]
    step = forward + backward
    ranks = {0: step * 3 + step, 1: step * 2 + forward + forward + backward}
    f = _culprit(ranks, 2, None)
    assert (f.kind, f.position, f.ranks) == ("missing", 14, [1]), (f.kind, f.position, f.ranks, f.message)
    assert "rank 1 out of step: it skipped the FSDP2 backward of step 2" in f.message, f.message


def test_a_collective_on_the_default_group_that_the_others_issue_on_a_subgroup_names_that_subgroup():
    """A 2x2 mesh: the tp leaders (ranks 0 and 2) all-reduce a scalar without `group=`, so on the
    default group, while ranks 1 and 3 all-reduce it on their tp groups: the default group's
    call is the culprit, its callers are exactly the dp group at tp=0."""
    groups = {"0": (0, 1, 2, 3), "1": (0, 2), "2": (1, 3), "3": (0, 1), "4": (2, 3)}
    step = [Call("allreduce_", group="3", size=16, line=28, outer=MAIN)]
    other = {0: "3", 1: "3", 2: "4", 3: "4"}
    ranks = {}
    for r in range(4):
        mine = [Call(**{**c.__dict__, "group": other[r]}) for c in step * 3]
        last = Call("allreduce_", group="0" if r in (0, 2) else other[r], size=1, line=43 if r in (0, 2) else 46,
                    done=False, outer=MAIN)
        ranks[r] = [Call("barrier", group="0", size=0, line=23, reduce_op=None)] + mine + [last]
    with tempfile.TemporaryDirectory() as d:
        report = analyse(write(d, groups, ranks, finished=()))
    f = report.findings[0]
    assert (f.kind, f.group, f.ranks) == ("extra", "0", [0, 2]), [(x.kind, x.group, x.ranks) for x in report.findings]
    assert f.details["group_hint"] == "1" and "without `group=`" in f.message, f.message
    assert f.fix.startswith("pass the group the call is meant for"), f.fix
