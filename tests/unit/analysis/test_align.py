"""The matcher's core (collcheck/analysis/align.py) on runs written call by call: which reading of
a divergence it takes (a skipped call, an extra one, a permuted window, a changed call), whom it
blames with and without a majority, and its pieces on their own."""

from __future__ import annotations

import math
import random
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from collcheck.analysis import align
from collcheck.analysis.diff import analyse
from collcheck.model import Signature
from support import examples
from support.runs import Call, write

LOOP = [("allreduce_", 4, 20), ("allreduce_", 8, 21), ("broadcast_", 16, 22), ("allgather_", 2, 23)]


def loop(steps: int, **kw) -> list[Call]:
    """A training loop: the same 4 distinct collectives every step."""
    return [Call(op, size=size, line=line, **kw) for _ in range(steps) for op, size, line in LOOP]


def world(n: int) -> dict:
    return {"0": tuple(range(n))}


def first(run):
    report = analyse(run)
    f = report.findings[0]
    return f.kind, f.group, f.position, f.ranks


def test_identical_ranks_give_no_finding(tmp_path):
    run = write(str(tmp_path), world(4), {r: loop(5) for r in range(4)})
    assert analyse(run).findings == [] and analyse(run).verdict == "clean"


def test_a_group_of_one_is_never_compared(tmp_path):
    groups = {"0": (0, 1), "1": (0,), "2": (1,)}
    run = write(str(tmp_path), groups, {0: loop(2) + [Call(group="1", size=3)], 1: loop(2) + [Call(group="2", size=5)]})
    assert analyse(run).findings == []


def test_the_majority_blames_the_one_rank_that_differs(tmp_path):
    ranks = {r: loop(3) for r in range(4)}
    ranks[2] = loop(1) + [Call("allreduce_", size=5, line=20)] + loop(2)[1:]  # #4: float32[5] where the others have [4]
    run = write(str(tmp_path), world(4), ranks)
    assert first(run) == ("shape_mismatch", "0", 4, [2])


@pytest.mark.parametrize("world_size", [2, 4])
def test_a_call_skipped_inside_a_loop_is_missing_not_a_permutation(tmp_path, world_size):
    """Rank 1 skips the broadcast of step 2: the sequences line up again one call later on the
    other ranks, which is a skipped call, not the same calls in another order."""
    ranks = {r: loop(4) for r in range(world_size)}
    ranks[1] = loop(4)[:10] + loop(4)[11:]
    run = write(str(tmp_path), world(world_size), ranks)
    assert first(run) == ("missing", "0", 10, [1])


@pytest.mark.parametrize("world_size", [2, 3])
def test_an_extra_call_from_a_line_the_others_never_run_is_extra(tmp_path, world_size):
    ranks = {r: loop(4) for r in range(world_size)}
    ranks[0] = loop(4)[:6] + [Call("allreduce_", size=1, line=99, func="debug_only")] + loop(4)[6:]
    run = write(str(tmp_path), world(world_size), ranks)
    assert first(run) == ("extra", "0", 6, [0])


def test_two_calls_swapped_are_one_order_mismatch(tmp_path):
    ranks = {r: loop(3) for r in range(2)}
    body = loop(3)
    body[5], body[6] = body[6], body[5]
    ranks[1] = body
    run = write(str(tmp_path), world(2), ranks)
    (f,) = analyse(run).findings
    assert (f.kind, f.position, f.ranks) == ("order_mismatch", 5, [1])
    assert f.details["window"] == 2 and list(f.details["permutation"]) == [1, 0]


@pytest.mark.parametrize("field, call, kind", [
    ("op", Call("broadcast_", size=4, line=20, reduce_op=None), "op_mismatch"),
    ("shape", Call("allreduce_", size=6, line=20), "shape_mismatch"),
    ("reduce op", Call("allreduce_", size=4, line=20, reduce_op=4), "reduce_op_mismatch"),
    ("purpose", Call("allreduce_", size=4, line=20, role="gradient bucket"), "semantic_mismatch"),
])
def test_a_changed_call_is_named_by_the_field_that_differs(tmp_path, field, call, kind):
    ranks = {r: loop(3) for r in range(3)}
    ranks[2] = loop(3)[:4] + [call] + loop(3)[5:]
    run = write(str(tmp_path), world(3), ranks)
    assert first(run) == (kind, "0", 4, [2]), field


def test_without_a_majority_the_call_from_a_line_only_one_rank_runs_is_the_odd_one(tmp_path):
    """Two ranks, the sequences end at the divergence (a hang follows): rank 1's call comes from a
    line rank 0 never runs, rank 0's from the loop both run: rank 1 made an extra call."""
    ranks = {0: loop(2) + [Call("allreduce_", size=4, line=20, done=False)],
             1: loop(2) + [Call("barrier", size=0, line=77, func="save_checkpoint", done=False)]}
    run = write(str(tmp_path), world(2), ranks, finished=())
    kind, _, position, culprits = first(run)
    assert (kind, position, culprits) == ("extra", 8, [1])


def test_findings_per_group_are_bounded(tmp_path):
    """A rank whose every call differs gives at most MAX_FINDINGS_PER_GROUP findings."""
    n = align.MAX_FINDINGS_PER_GROUP + 15
    ranks = {0: [Call(size=2 * i + 2, line=30) for i in range(n)],
             1: [Call(size=2 * i + 3, line=30) for i in range(n)]}
    run = write(str(tmp_path), world(2), ranks)
    kinds = [f for f in analyse(run).findings if f.group == "0"]
    assert 0 < len(kinds) <= align.MAX_FINDINGS_PER_GROUP


def test_a_stand_in_label_is_join_s():
    class E:
        label = "join() shadow: gradient bucket 0"

    assert align.stands_in(E()) and not align.stands_in(None)
    E.label = "DDP backward: gradient bucket 0"
    assert not align.stands_in(E())


def sig(op="allreduce_", shape=(4,), dtype="float32", reduce_op=0, root=None, role=None) -> Signature:
    return Signature(op, ((dtype, shape),), reduce_op, root, role, api=op)


@pytest.mark.parametrize("a, b, kind", [
    (sig(), sig(op="broadcast_", reduce_op=None), "op_mismatch"),
    (sig(), sig(shape=(5,)), "shape_mismatch"),
    (sig(), sig(dtype="bfloat16"), "dtype_mismatch"),
    (sig(), sig(reduce_op=3), "reduce_op_mismatch"),
    (sig(op="broadcast_", root=0), sig(op="broadcast_", root=1), "root_mismatch"),
    (sig(), sig(role="gradient bucket"), "semantic_mismatch"),
    # the op wins over everything else, the shape over the dtype
    (sig(), sig(op="broadcast_", shape=(9,), dtype="int64"), "op_mismatch"),
    (sig(), sig(shape=(9,), dtype="int64"), "shape_mismatch"),
])
def test_field_mismatch_names_the_most_telling_difference(a, b, kind):
    assert align.field_mismatch(a, b) == kind == align.field_mismatch(b, a)


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(0, 5), max_size=12), st.randoms(use_true_random=False))
def test_permutation_maps_each_slot_to_an_equal_one(reference, rnd):
    actual = list(reference)
    rnd.shuffle(actual)
    perm = align._permutation(reference, actual)
    assert sorted(perm) == list(range(len(reference)))
    assert [reference[j] for j in perm] == actual


class _Seqs:
    def __init__(self, a, b):
        self.seq = {0: array("I", a), 1: array("I", b)}


def _aligner(a, b, cut_short=frozenset()):
    al = align._Aligner.__new__(align._Aligner)
    al.seq = _Seqs(a, b).seq
    al.pos = {0: 0, 1: 0}
    al.cut_short = cut_short
    return al


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.integers(0, 3), max_size=300), st.lists(st.integers(0, 3), max_size=300),
       st.integers(0, 3), st.integers(0, 3), st.booleans())
def test_agreement_is_the_common_run_before_the_first_difference(a, b, off_a, off_b, same_start):
    """The galloping search equals a plain walk; both ending together is infinite agreement
    unless a rank was cut short."""
    if same_start:
        b = a[: len(b)] + b[len(a):]  # long equal runs, where galloping matters
    al = _aligner(a, b)
    i, j = off_a, off_b
    n = 0
    while i + n < len(a) and j + n < len(b) and a[i + n] == b[j + n]:
        n += 1
    whole = i + n >= len(a) and j + n >= len(b) and max(len(a) - i, 0) == max(len(b) - j, 0)
    got = al.agreement(0, off_a, 1, off_b)
    assert got == (math.inf if whole else n)
    if whole:
        assert _aligner(a, b, frozenset({1})).agreement(0, off_a, 1, off_b) == n


def test_big_groups_show_the_culprits_and_one_rank_per_other_signature(tmp_path):
    """Past 16 members a finding's events are the culprits and a representative of each other
    signature, not every member."""
    n = 24
    ranks = {r: loop(2) for r in range(n)}
    ranks[17] = loop(1) + [Call(size=5, line=20)] + loop(2)[5:]
    run = write(str(tmp_path), world(n), ranks)
    f = analyse(run).findings[0]
    assert (f.kind, f.ranks) == ("shape_mismatch", [17])
    assert 17 in f.events and len(f.events) < n


def test_random_loops_with_one_skipped_call_blame_that_rank(tmp_path):
    """A seeded sweep: 3 ranks, a loop of 4 distinct calls, one rank skips one call in the middle:
    missing, on that rank, at that slot."""
    rng = random.Random(5)
    for case in range(6):
        steps, rank = rng.randint(3, 6), rng.randrange(3)
        at = rng.randrange(4, 4 * steps - 4)
        ranks = {r: loop(steps) for r in range(3)}
        ranks[rank] = loop(steps)[:at] + loop(steps)[at + 1:]
        d = tmp_path / str(case)
        d.mkdir()
        assert first(write(str(d), world(3), ranks)) == ("missing", "0", at, [rank]), (steps, rank, at)
