"""A job whose nodes wrote their logs to their own disks: `collcheck diff node0/ node1/` (and stats,
export, tui) read the folders as one run, with the same findings as the same logs copied into one
folder; a folder named twice is read once; logs and dumps together, or a folder with nothing to
read, are one line and exit 2."""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest
from support.cli import run_cli
from support.fr_dumps import dump, entry, write_dumps

from collcheck import synth
from collcheck.inputs.discover import discover_all

KINDS = ("missing", "op_mismatch", "shape_mismatch")


def _split_run(tmp_path, kind: str, world: int = 4, nodes: int = 2):
    """A synthetic run with one fault, written whole into `all/` and spread over `node<i>/` (the
    ranks of node i: i * world / nodes onwards, as torchrun numbers them)."""
    rng = random.Random(7)
    for _ in range(200):
        prog = synth.generate_program(rng, world, 24, groups=0, p2p=False, coalesced=False)
        cands = synth.fault_candidates(prog, kind)
        if cands:
            break
    else:
        pytest.skip("no candidate program")
    whole = tmp_path / "all"
    paths = synth.write_run(str(whole), prog, [cands[len(cands) // 2]])
    folders = [tmp_path / f"node{i}" for i in range(nodes)]
    for folder in folders:
        folder.mkdir()
    for path in paths:
        rank = int(os.path.basename(path).split("-")[1].split(".")[0])
        shutil.copy(path, folders[rank * nodes // world] / os.path.basename(path))
    return str(whole), [str(f) for f in folders]


def _report(*paths: str) -> tuple[int, dict]:
    res = run_cli("diff", *paths, "--format", "json")
    assert res.code in (0, 1, 4) and not res.err, (res.code, res.err)
    report = json.loads(res.out)
    report.pop("run")  # (the folder read: the one given, or the folders' common parent)
    return res.code, report


@pytest.mark.parametrize("kind", KINDS)
def test_a_folder_per_node_reads_as_the_run_copied_together(tmp_path, kind):
    whole, nodes = _split_run(tmp_path, kind)
    code, together = _report(whole)
    assert code == 1 and together["findings"], together["verdict"]
    assert _report(*nodes) == (code, together)
    assert _report(*reversed(nodes)) == (code, together)
    assert _report(*nodes, nodes[0]) == (code, together)  # a folder named twice is read once
    only_one = _report(nodes[0])
    assert only_one[1]["verdict"] != together["verdict"] or only_one[1]["unchecked"], only_one  # half the ranks


def test_stats_and_export_read_several_folders(tmp_path):
    whole, nodes = _split_run(tmp_path, "missing")
    for argv in (("stats", "--format", "json"), ("export", "--format", "perfetto", "-o", str(tmp_path / "t.json"))):
        res = run_cli(argv[0], *nodes, *argv[1:])
        assert res.code == 0 and not res.err, (argv, res.code, res.err)
    stats = json.loads(run_cli("stats", *nodes, "--format", "json").out)
    assert stats == json.loads(run_cli("stats", whole, "--format", "json").out) | {"run": stats.get("run")}


def test_logs_and_dumps_together_or_an_empty_folder_are_one_line(tmp_path):
    _, nodes = _split_run(tmp_path, "missing")
    dumps = write_dumps(tmp_path / "dumps", {r: dump([entry(0, "0", 1, "all_reduce", [4])], {"0": [0, 1]})
                                            for r in range(2)})
    empty = tmp_path / "empty"
    empty.mkdir()
    for paths in ((nodes[0], str(dumps)), (nodes[0], str(empty)), (nodes[0], str(tmp_path / "missing"))):
        res = run_cli("diff", *paths)
        assert res.code == 2 and res.err.startswith("collcheck: error:") and res.err.count("\n") == 1, (paths, res.err)


def test_discover_all_keeps_every_folder_as_an_input(tmp_path):
    """An output may land on none of the folders' logs (base/outputs.py): each folder's own."""
    _, nodes = _split_run(tmp_path, "missing")
    source = discover_all(nodes)
    folders = {f for f, _ in source.inputs().folders}
    assert folders == set(nodes) and len(source.found) == 4
    res = run_cli("diff", *nodes, "-o", os.path.join(nodes[1], "rank-00009.0.msgpack"))
    assert res.code == 2 and res.err.count("\n") == 1, (res.code, res.err)
