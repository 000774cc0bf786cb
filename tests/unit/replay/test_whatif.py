"""Replay what-if edits in-process (collcheck/replay/whatif.py): drop, insert and move one rank's
collective in the plan, ranks cut by the hang following their peers, and the usage errors."""

from __future__ import annotations

import pytest
from support import runs
from support.runs import Call

from collcheck.base.errors import UsageError
from collcheck.logfile.reader import LogError
from collcheck.replay.plan import build_plan
from collcheck.replay.whatif import Edit, parse_edit


def _hang_run(tmp_path):
    """Rank 1 skips the barrier rank 0 waits in (killed there); both all-reduce twice before."""
    ranks = {0: [Call(line=10), Call(line=11), Call("barrier", line=12, done=False, reduce_op=None)],
             1: [Call(line=10), Call(line=11)]}
    return runs.write(str(tmp_path), {"0": (0, 1)}, ranks, finished=[1])


def _ops(plan, rank):
    return [(a["op"], a["i"]) for a in plan.ranks[rank] if a["k"] == "op"]


@pytest.mark.parametrize("kind, text, edit", [
    ("drop", "0:2", Edit("drop", 0, 2)),
    ("insert", "1:-1=0:2", Edit("insert", 1, -1, 0, 2)),
    ("move", "0:0:-1", Edit("move", 0, 0, 0, -1)),
])
def test_edits_parse_and_say_what_they_do(kind, text, edit):
    assert parse_edit(kind, text) == edit
    assert f"#{edit.index}" in edit.describe()


@pytest.mark.parametrize("kind, text", [("drop", "0"), ("insert", "1:2"), ("move", "a:b:c"), ("drop", "0:1:2")])
def test_a_malformed_edit_is_a_usage_error(kind, text):
    with pytest.raises(UsageError, match=f"--{kind}"):
        parse_edit(kind, text)


def test_dropping_the_extra_barrier_lines_the_ranks_up(tmp_path):
    plan = build_plan(_hang_run(tmp_path), edits=[parse_edit("drop", "0:2")])
    assert _ops(plan, 0) == [("allreduce_", 0), ("allreduce_", 1)]
    assert _ops(plan, 1) == [("allreduce_", 0), ("allreduce_", 1)]


def test_inserting_the_missing_barrier_at_the_end_of_the_other_rank(tmp_path):
    plan = build_plan(_hang_run(tmp_path), edits=[parse_edit("insert", "1:-1=0:2")])
    assert [op for op, _ in _ops(plan, 1)] == ["allreduce_", "allreduce_", "barrier"]
    inserted = [a for a in plan.ranks[1] if a["k"] == "op"][-1]
    assert inserted["i"] >= 1_000_000_000 and inserted["a"] == 0  # a copy, not rank 1's own event


def test_moving_a_collective_reorders_only_that_rank(tmp_path):
    plan = build_plan(_hang_run(tmp_path), edits=[parse_edit("move", "0:0:-1")])
    assert [i for _, i in _ops(plan, 0)] == [1, 2, 0]
    assert [i for _, i in _ops(plan, 1)] == [0, 1]


def test_a_rank_cut_by_the_hang_follows_its_peers_after_an_edit(tmp_path):
    """Rank 0 is cut in a barrier rank 1 never calls; rank 1 all-reduces twice more. With the
    barrier dropped, rank 0 goes on like its peer: copies of rank 1's two further all-reduces
    (none with --no-follow)."""
    ranks = {0: [Call(line=10), Call(line=11), Call("barrier", line=13, done=False, reduce_op=None)],
             1: [Call(line=10), Call(line=11), Call(line=12), Call(line=14)]}
    run = runs.write(str(tmp_path), {"0": (0, 1)}, ranks, finished=[1])
    edits = [parse_edit("drop", "0:2")]
    followed = build_plan(run, edits=edits, follow=True)
    assert any("rank 0 +2" in n for n in followed.notes), followed.notes
    assert [op for op, _ in _ops(followed, 0)] == ["allreduce_"] * 4
    alone = build_plan(run, edits=edits, follow=False)
    assert len(_ops(alone, 0)) == 2 and not alone.notes


@pytest.mark.parametrize("kind, text, says", [
    ("drop", "0:9", "no collective #9"), ("insert", "1:0=0:7", "no collective #7")])
def test_an_edit_of_a_collective_that_is_not_there_is_an_input_error(tmp_path, kind, text, says):
    with pytest.raises(LogError, match=says):
        build_plan(_hang_run(tmp_path), edits=[parse_edit(kind, text)])


def test_an_edit_of_a_rank_not_replayed_is_an_input_error(tmp_path):
    with pytest.raises(LogError, match="not replayed"):
        build_plan(_hang_run(tmp_path), ranks=[0], edits=[parse_edit("insert", "0:0=1:0")])
