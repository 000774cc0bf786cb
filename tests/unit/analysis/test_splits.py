"""all_to_all_single split sizes (collcheck/analysis/splits.py): which rank sends what the other
expects, on runs written in memory and on sizes alone."""

from __future__ import annotations

from support import runs
from support.runs import Call
from support.cli import diff_json

from collcheck.analysis.splits import mismatched_pairs


def test_even_splits_agree_and_uneven_ones_are_compared_pairwise():
    rows, per_row = 4, 3
    assert mismatched_pairs([(rows, per_row, (), ()), (rows, per_row, (), ())]) == []
    # rank 0 sends 3 rows to rank 1, which expects 1 from it
    got = mismatched_pairs([(4, per_row, (1, 3), (1, 1)), (4, per_row, (2, 2), (1, 2))])
    assert (0, 1, 3 * per_row, 1 * per_row) in got
    assert all(s != e for _, _, s, e in got)
    assert mismatched_pairs([(5, 1, (), ()), (5, 1, (), ())]) == []  # rows % ranks: sizes unknown, nothing said


def _a2a(splits, line=20):
    return Call("alltoall_base_", size=4, line=line, reduce_op=None, splits=splits)


def test_a_rank_with_stale_split_sizes_is_the_culprit(tmp_path):
    """Three ranks; rank 2's output splits disagree with what ranks 0 and 1 send it: rank 2 is in
    every disagreeing pair, so it alone is blamed, at the all-to-all's slot."""
    ranks = {0: [Call(line=10), _a2a(((2, 1, 1), (2, 1, 2)))],
             1: [Call(line=10), _a2a(((1, 2, 1), (1, 2, 2)))],
             2: [Call(line=10), _a2a(((1, 1, 2), (3, 3, 3)))]}
    runs.write(str(tmp_path), {"0": (0, 1, 2)}, ranks)
    _, report = diff_json(str(tmp_path), codes=(1,))
    first = report["findings"][0]
    assert first["kind"] == "split_mismatch" and first["ranks"] == [2], first
    assert first["position"] == 1


def test_agreeing_uneven_splits_are_no_finding(tmp_path):
    ranks = {0: [_a2a(((1, 3), (1, 2)))], 1: [_a2a(((2, 2), (3, 2)))]}
    runs.write(str(tmp_path), {"0": (0, 1)}, ranks)
    assert diff_json(str(tmp_path), codes=(0,))[1]["findings"] == []
