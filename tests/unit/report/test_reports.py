"""Reporters and exit codes on synthetic runs: text (folded columns), json, junit, github."""

from __future__ import annotations

import io
import json
import os
import random
import xml.etree.ElementTree as ET

import pytest
from support.reports import assert_rows_line_up

from collcheck import synth
from collcheck.analysis.diff import analyse
from collcheck.cli import main
from collcheck.model import load_run
from collcheck.report import render, words


def faulty_run(tmp_path, world=64, kind="dtype_mismatch", seed=3):
    rng = random.Random(seed)
    for _ in range(200):
        prog = synth.generate_program(rng, world, 30, groups=0, p2p=False, coalesced=False)
        cands = synth.fault_candidates(prog, kind)
        if cands:
            fault = cands[len(cands) // 2]
            synth.write_run(str(tmp_path), prog, [fault])
            return str(tmp_path), fault.expect(prog)
    pytest.skip("no candidate program")


def test_text_report_folds_identical_ranks(tmp_path):
    d, exp = faulty_run(tmp_path)
    out = io.StringIO()
    report = analyse(load_run(d))
    render(report, "text", out)
    text = out.getvalue()
    assert "FIRST DIVERGENCE: dtype mismatch" in text
    assert f"culprit rank {exp.ranks[0]}" in text
    others = sorted(set(range(64)) - set(exp.ranks))
    # 63 agreeing ranks fold into at most two columns around the culprit's
    assert "ranks 0-" in text or f"ranks {others[0]}-" in text
    assert "under NCCL" in text and "under gloo" in text


def test_json_report_schema(tmp_path):
    d, exp = faulty_run(tmp_path, world=4)
    out = io.StringIO()
    render(analyse(load_run(d)), "json", out)
    doc = json.loads(out.getvalue())
    assert doc["collcheck_json"] == 1 and doc["verdict"] == "mismatch" and doc["world"] == 4
    f = doc["findings"][0]
    assert (f["kind"], f["group"], f["position"], f["ranks"]) == (exp.kind, exp.group, exp.position, exp.ranks)
    ev = f["events"][str(exp.ranks[0])]
    assert ev["site"]["file"] == synth.USER_FILE and ev["dtypes"] != f["expected"]["dtypes"]
    assert set(doc["ranks"]) == {"0", "1", "2", "3"} and doc["ranks"]["0"]["state"] == "finished"


def test_junit_and_github(tmp_path):
    d, exp = faulty_run(tmp_path, world=4)
    report = analyse(load_run(d))
    out = io.StringIO()
    render(report, "junit", out)
    suite = ET.fromstring(out.getvalue())
    assert int(suite.get("failures")) == len(report.findings) >= 1
    assert suite.find(".//failure").get("type") == exp.kind
    out = io.StringIO()
    render(report, "github", out)
    first = out.getvalue().splitlines()[0]
    assert first.startswith("::error file=") and "line=" in first and exp.kind in first


def test_exit_codes(tmp_path, capsys):
    d, _ = faulty_run(tmp_path / "bad", world=4)
    assert main(["diff", d]) == 1
    assert main(["diff", d, "--exit-zero"]) == 0
    clean = tmp_path / "clean"
    prog = synth.generate_program(random.Random(1), 4, 20, groups=1)
    synth.write_run(str(clean), prog)
    capsys.readouterr()
    assert main(["diff", str(clean), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "clean"
    assert main(["diff", str(tmp_path / "nope")]) == 2
    assert main(["show", str(next(clean.iterdir()))]) == 0


@pytest.mark.parametrize("error, state", [
    ("RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 6000ms for recv operation",
     "timed-out"),
    ("RuntimeError: [../gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:40121", "peer-lost"),
    ("RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection reset by peer", "peer-lost"),
    ("RuntimeError: [enforce fail at ../gloo/alltoallv.cc:138] inLengthPerRank[myRank] == outLengthPerRank[myRank]",
     "collective-failed"),
])
def test_how_a_last_collective_failed(error, state):
    """The final-state table tells a timeout from a lost peer from an op that failed by itself."""
    from collcheck.analysis.hang import _error_state

    assert _error_state([error]) == state


def test_github_annotation_of_a_skipped_collective_points_at_the_others_call(tmp_path):
    """A rank that skipped a call has no event there: the annotation goes to the call it skipped."""
    d, exp = faulty_run(tmp_path, world=4, kind="missing")
    report = analyse(load_run(d))
    assert report.first.kind == "missing" and report.first.expected is not None
    out = io.StringIO()
    render(report, "github", out)
    site = report.first.expected.site
    first = out.getvalue().splitlines()[0]
    assert f"file={os.path.relpath(site[0])},line={site[1]}," in first, first


def test_skipped_ddp_sync_reports_the_counts_per_rank(tmp_path):
    """A DDP gradient all-reduce one rank never issued: the counts per rank point at uneven
    inputs or a rank-dependent no_sync(), not at a one-off skipped call."""
    prog = synth.Program(2, {"0": (0, 1)}, [])
    site = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (289,)),), 0, site=site, role=synth.ROLE,
                         label="DDP backward: gradient bucket 0", native=True)] * 4
    synth.write_run(str(tmp_path), prog, [synth.Fault("missing", 1, 3)])
    first = analyse(load_run(str(tmp_path))).first
    assert (first.kind, first.ranks, first.position) == ("missing", [1], 3)
    assert "different numbers of DDP gradient all-reduces (rank 0: 4, rank 1: 3)" in first.message
    assert "no_sync()" in first.message and "e.g. uneven inputs)" not in first.message


def test_rank_that_crashed_on_the_culprits_data_is_its_victim(tmp_path):
    """Rank 2 sends a bigger tensor; gloo's size check kills rank 1 (SIGABRT), which the others then
    wait on. The hang is blamed on rank 2, the first divergence's culprit, and says why."""
    prog = synth.Program(3, {"0": (0, 1, 2)}, [])
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=prog.add_site())]
    paths = synth.write_run(str(tmp_path), prog, [synth.Fault("shape_mismatch", 2, 0)], done=False, trailer=False)
    with open(paths[1][: -len(".msgpack")] + ".sigterm.txt", "w") as f:
        f.write("Fatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n  <no Python frame>\n")
    report = analyse(load_run(str(tmp_path)))
    first, hang = report.findings[0], report.findings[-1]
    assert (first.kind, first.ranks) == ("shape_mismatch", [2])
    assert hang.kind == "hang" and hang.ranks == [2] and report.hang.root_causes == [1]
    assert "rank 1 (crashed), which failed inside the collective because of the first divergence " \
           "(shape_mismatch by rank 2)" in hang.message


def test_side_by_side_rows_are_slots_even_where_a_rank_ended_earlier(tmp_path, monkeypatch):
    """Rank 2 stopped after 2 collectives; ranks 0-1 wait in #7 (NCCL-style dumps). The hang's
    table at #7 shows nothing for rank 2 near #7 (it used to show rank 2's last collectives, #0 and
    #1, in the rows of #5 and #6)."""
    import pathlib

    from support.fr_dumps import dump, entry, write_dumps

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    members = {"0": [0, 1, 2]}

    def seq(n, pending=()):
        return [entry(i, "0", i + 1, "all_reduce", [4], state="started" if i in pending else "completed")
                for i in range(n)]

    d = write_dumps(pathlib.Path(tmp_path / "dumps"), {0: dump(seq(8, (7,)), members), 1: dump(seq(8, (7,)), members),
                                                      2: dump(seq(2), members)})
    report = analyse(load_run(str(d)))
    assert [(f.kind, f.number) for f in report.findings] == [("missing", 2), ("hang", 7)], report.findings
    assert_rows_line_up(report)


def test_a_run_over_several_hosts_says_which_ranks_ran_where(tmp_path):
    """Which node? On a run over several hosts the final-state table folds the ranks by host too
    (text report and TUI overview alike), and the JSON names each rank's host; on one host the
    table has no host column."""
    from rich.console import Console

    from collcheck.tui.widgets import panes

    prog = synth.Program(4, {"0": (0, 1, 2, 3)}, [])
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=prog.add_site()) for _ in range(3)]
    hosts = {0: "node-a", 1: "node-a", 2: "node-b\x1b[31m", 3: "node-b\x1b[31m"}
    synth.write_run(str(tmp_path / "two"), prog, [synth.Fault("missing", 2, 3)], done=False, trailer=False,
                    hosts=hosts)
    report = analyse(load_run(str(tmp_path / "two")))
    rows = [(row.ranks, row.host) for row in words.final_states(report)]
    assert ("0-1", "node-a") in rows and any(h.startswith("node-b") and "\x1b" not in h for _, h in rows), rows
    out = io.StringIO()
    render(report, "text", out)
    overview = io.StringIO()
    Console(file=overview, width=200).print(panes.overview(report))
    sentence = next(line for line in words.host_lines(report) if "node-a" in line)
    assert sentence.startswith("all 2 ranks of node-a (0-1): "), sentence
    for text in (out.getvalue(), overview.getvalue()):
        assert "host" in text and "node-a" in text and "\x1b[31m" not in text
        assert sentence in text, text
    data = json.loads(_json(report))
    assert [data["ranks"][str(r)]["host"] for r in range(4)] == [hosts[r] for r in range(4)]

    synth.write_run(str(tmp_path / "one"), prog, [synth.Fault("missing", 2, 3)], done=False, trailer=False)
    one = analyse(load_run(str(tmp_path / "one")))
    assert all(row.host == "" for row in words.final_states(one))
    assert words.host_lines(one) == []


def _json(report) -> str:
    out = io.StringIO()
    render(report, "json", out)
    return out.getvalue()
