"""A run's groups indexed once (model/group_index.py) and shown in bounded text (model/ranks.py):
members as recorded, DeviceMesh labels with their coordinates, groups found by their members, and
rank lists of any length in a few dozen characters."""

from __future__ import annotations

from support import runs
from support.runs import Call

from collcheck.model import group_label, members_text, rank_ranges
from collcheck.model.ranks import MAX_PIECES

MESH = {"0": (0, 1, 2, 3), "1": (0, 2), "2": (1, 3), "3": (0, 1), "4": (2, 3)}  # dp groups 1, 2; tp groups 3, 4
DESCS = {"1": "mesh_dp", "2": "mesh_dp", "3": "mesh_tp", "4": "mesh_tp"}


def _mesh_run(tmp_path):
    calls = {r: [Call(group=g, line=10 + int(g)) for g in MESH if r in MESH[g]] for r in range(4)}
    return runs.write(str(tmp_path), MESH, calls, descs=DESCS)


def test_members_and_names_come_from_the_ranks_logs(tmp_path):
    run = _mesh_run(tmp_path)
    assert run.group_names() == ["0", "1", "3", "2", "4"]  # rank 0's groups first, then rank 1's new ones
    assert [run.group_members(g) for g in ("0", "1", "4")] == [(0, 1, 2, 3), (0, 2), (2, 3)]
    assert run.group_members("no such group") == ()
    assert run.global_rank("2", 1) == 3 and run.global_rank("2", 5) == 5 and run.global_rank("2", None) is None


def test_a_mesh_group_is_labelled_with_its_place_on_the_other_dimensions(tmp_path):
    run = _mesh_run(tmp_path)
    assert group_label(run, "1") == "group 1 (mesh dp [0, 2] at tp=0)"
    assert group_label(run, "2") == "group 2 (mesh dp [1, 3] at tp=1)"
    assert group_label(run, "4") == "group 4 (mesh tp [2, 3] at dp=1)"
    assert group_label(run, "0") == "group 0"


def test_groups_are_found_by_their_members(tmp_path):
    run = runs.write(str(tmp_path), {"0": (0, 1), "1": (0, 1), "2": (1, 0)}, {r: [Call()] for r in (0, 1)})
    assert run.group_index.named_by_members((0, 1)) == ["0", "1"]  # (the first two, in the order of group_names)
    assert run.group_index.named_by_members((1,)) == []


def test_the_index_is_built_again_when_ranks_are_added(tmp_path):
    run = runs.write(str(tmp_path / "a"), {"0": (0, 1)}, {0: [Call()]})
    assert run.group_names() == ["0"]
    other = runs.write(str(tmp_path / "b"), {"0": (0, 1), "5": (1,)}, {1: [Call(group="5")]})
    run.ranks[1] = other.ranks[1]
    assert run.group_names() == ["0", "5"] and run.group_members("5") == (1,)


def test_a_rank_list_of_any_length_is_shown_in_a_few_runs():
    assert rank_ranges([3, 0, 1, 2, 5, 7, 8]) == "0-3,5,7-8" and rank_ranges([]) == "-"
    assert rank_ranges(range(1 << 20)) == "0-1048575"
    every_other = rank_ranges(range(0, 1 << 20, 2))
    assert every_other.startswith("0,2,4,") and every_other.endswith(",…,1048574 (524,288 ranks)")
    assert every_other.count(",") == MAX_PIECES + 1 and len(every_other) < 100  # (the count's own comma too)


def test_a_member_list_keeps_its_order_when_short_and_is_counted_when_long():
    assert members_text((0, 2, 1)) == "[0, 2, 1]"
    assert members_text(range(1 << 20)) == "1,048,576 ranks: 0-1048575"
    assert members_text(range(0, 64, 2)).startswith("32 ranks: 0,2,4")
