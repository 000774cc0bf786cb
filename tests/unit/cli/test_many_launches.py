"""A folder of several launches on the command line (docs/diff.md, 'Many launches in one folder'):
`diff` checks each, one line per launch and the full report of the buggy one, exit 1; --launch
picks one; json, junit and github carry the launch; stats, export and tui; a folder of one launch
reads exactly as before."""

from __future__ import annotations

import io
import json
import os
import shutil
from xml.etree import ElementTree as ET

import pytest
from support.cli import run_cli
from support.logbytes import small_program

from collcheck import synth
from collcheck.base.errors import LogError

S = 1_000_000_000
T0 = 1_700_000_000 * S
COLUMNS = 200
IDS = ["job-a", "job-b", "pytest#1", "pytest#2"]


def write(directory, run_id: str, world: int = 2, start_s: int = 0, faults=(), end_s: int | None = None):
    prog = small_program(world)
    prog.run_id = run_id
    paths = synth.write_run(str(directory), prog, faults, wall_ns=T0 + start_s * S)
    for path in paths if end_s is not None else ():
        os.utime(path, ns=(T0 + end_s * S,) * 2)
    return paths


@pytest.fixture
def folder(tmp_path):
    """job-a (clean), job-b (rank 2's broadcast has another shape), and two clean tests whose
    spawned ranks share the test session's run id in one folder."""
    root = tmp_path / "logs"
    write(root / "a", "job-a", start_s=10)
    write(root / "b", "job-b", world=3, start_s=20, faults=[synth.Fault("shape_mismatch", 2, 1)])
    write(root / "t", "pytest", start_s=30, end_s=35)
    write(root / "t", "pytest", start_s=40, end_s=45)
    return root


def cli(*argv, env=None):
    return run_cli(*argv, columns=COLUMNS, env=env)


def test_diff_prints_a_line_per_launch_then_the_buggy_ones_report(folder):
    res = cli("diff", folder)
    single = cli("diff", folder / "b")
    assert (res.code, res.err, single.code) == (1, "", 1)
    assert res.out.splitlines()[:6] == [
        f"collcheck diff: {folder}  (4 launches)",
        "  CLEAN       job-a        2/2 ranks          6 collectives",
        "  MISMATCH    job-b        3/3 ranks          9 collectives  tensor size mismatch: group 0, #1, culprit rank 2",
        "  CLEAN       pytest#1     2/2 ranks          6 collectives",
        "  CLEAN       pytest#2     2/2 ranks          6 collectives",
        "4 launches: 1 with findings, 3 clean",
    ]
    rule = res.out.splitlines()[7]
    assert " launch job-b " in rule and rule.strip("─ ") == "launch job-b"
    assert res.out.endswith("\n" + rule + "\n" + single.out) and res.out.count("FIRST DIVERGENCE") == 1


def test_a_clean_folder_exits_0_and_an_incomplete_launch_4(folder):
    shutil.rmtree(folder / "b")
    res = cli("diff", folder)
    assert (res.code, res.out.splitlines()[-1]) == (0, "3 launches: 3 clean")
    paths = write(folder / "c", "job-c", world=3, start_s=50)
    os.remove(paths[2])
    res = cli("diff", folder)
    assert res.code == 4 and res.out.splitlines()[-1] == "4 launches: 1 incomplete, 3 clean"
    assert res.out.splitlines()[-2] == ("  INCOMPLETE  job-c        2/3 ranks          6 collectives  no log for rank(s) 2: "
                                        "they never reached init_process_group or their logs are missing")
    assert cli("diff", folder, "--exit-zero").code == 0


def test_findings_outrank_an_unreadable_launch_which_outranks_incomplete(folder, monkeypatch):
    """A launch whose logs fail to load after discovery (a file removed meanwhile): its own line,
    the others checked; exit 1 with findings, else 2."""
    from collcheck import model

    real = model.load_run

    def load(source, *a, **k):
        if source.path.endswith("a"):
            raise LogError(f"{source.found[0]}: no such file")
        return real(source, *a, **k)

    monkeypatch.setattr(model, "load_run", load)
    res = cli("diff", folder)
    assert res.code == 1
    assert res.out.splitlines()[1] == f"  UNREADABLE  job-a     world 2: {folder / 'a' / 'rank-00000.0.msgpack'}: no such file"
    assert res.out.splitlines()[5] == "4 launches: 1 with findings, 2 clean, 1 unreadable"
    assert cli("diff", folder, "--launch", "pytest").code == 2  # (two launches: a usage error)
    shutil.rmtree(folder / "b")
    assert cli("diff", folder).code == 2 and cli("diff", folder, "--exit-zero").code == 2
    items = json.loads(cli("diff", folder, "--format", "json").out)
    assert items[0] == {"collcheck_json": 1, "launch": "job-a", "world": 2, "verdict": "error",
                        "error": f"{folder / 'a' / 'rank-00000.0.msgpack'}: no such file"}
    suites = ET.fromstring(cli("diff", folder, "--format", "junit").out)
    assert (suites.get("errors"), suites[0].find("testcase/error").get("message")) == ("1", items[0]["error"])
    github = cli("diff", folder, "--format", "github").out
    assert github.startswith("::error title=collcheck%3A launch job-a could not be read::") and "::notice" not in github


def test_launch_picks_one_by_id_or_unique_prefix(folder):
    single = cli("diff", folder / "b")
    res = cli("diff", folder, "--launch", "job-b")
    assert (res.code, res.out) == (1, f"launch job-b of {folder}\n" + single.out)
    assert cli("diff", folder, "--launch", "pytest#2").code == 0
    res = cli("diff", folder, "--launch", "job")
    assert (res.code, res.out) == (2, "")
    assert res.err == f"collcheck: error: --launch job names 2 launches in {folder}: job-a, job-b\n"
    res = cli("diff", folder, "--launch", "nope")
    assert res.err == f"collcheck: error: no launch nope in {folder}; its launches: {', '.join(IDS)}\n"
    picked = json.loads(cli("diff", folder, "--launch", "job-b", "--format", "json").out)
    alone = json.loads(cli("diff", folder / "b", "--format", "json").out)
    assert list(picked) == ["collcheck_json", "launch", *list(alone)[1:]]
    assert picked.pop("launch") == "job-b" and picked == alone


def test_json_is_a_list_of_per_launch_reports(folder):
    res = cli("diff", folder, "--format", "json")
    items = json.loads(res.out)
    assert res.code == 1 and [(x["launch"], x["verdict"]) for x in items] == [
        ("job-a", "clean"), ("job-b", "mismatch"), ("pytest#1", "clean"), ("pytest#2", "clean")]
    alone = json.loads(cli("diff", folder / "b", "--format", "json").out)
    assert items[1].pop("launch") == "job-b" and items[1] == alone
    assert items[1]["findings"][0]["kind"] == "shape_mismatch" and items[1]["findings"][0]["ranks"] == [2]


def test_junit_has_a_testsuite_per_launch(folder):
    res = cli("diff", folder, "--format", "junit")
    suites = ET.fromstring(res.out)
    assert res.code == 1 and suites.tag == "testsuites"
    assert [(s.get("name"), s.get("failures")) for s in suites] == [
        ("job-a", "0"), ("job-b", "1"), ("pytest#1", "0"), ("pytest#2", "0")]
    assert (suites.get("tests"), suites.get("failures"), suites.get("errors")) == ("8", "1", "0")
    alone = ET.fromstring(cli("diff", folder / "b", "--format", "junit").out)
    alone.set("name", "job-b")
    assert ET.tostring(suites[1]) == ET.tostring(alone)


def test_github_annotations_name_the_launch(folder):
    res = cli("diff", folder, "--format", "github")
    [line] = res.out.splitlines()
    assert res.code == 1 and line.startswith("::error file=") and (
        ",line=101,title=collcheck shape_mismatch (group 0%2C #1) in launch job-b::rank 2 issued broadcast" in line)
    shutil.rmtree(folder / "b")
    res = cli("diff", folder, "--format", "github")
    assert (res.code, res.out) == (0, "::notice title=collcheck::no divergence found in 3 launches\n")
    res = cli("diff", folder, "--format", "github", "--launch", "job-a")
    assert res.out == "::notice title=collcheck::no divergence found in launch job-a\n"


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "github"])
@pytest.mark.parametrize("where", ["run", "root"])
def test_a_folder_of_one_launch_reads_as_before(tmp_path, fmt, where):
    """The same bytes as the one-run pipeline (discover's newest run, load_run, analyse, render)."""
    from collcheck.analysis.diff import analyse
    from collcheck.inputs.discover import discover
    from collcheck.model import load_run
    from collcheck.report import render

    write(tmp_path / "run", "job", world=3, faults=[synth.Fault("shape_mismatch", 2, 1)])
    target = tmp_path / "run" if where == "run" else tmp_path
    before = io.StringIO()
    os.environ["COLUMNS"] = str(COLUMNS)
    try:
        render(analyse(load_run(discover(str(target), newest=True))), fmt, before)
    finally:
        del os.environ["COLUMNS"]
    res = cli("diff", target, "--format", fmt)
    assert (res.code, res.out, res.err) == (1, before.getvalue(), "")


def test_stats_a_line_per_launch_and_one_launchs_tables(folder):
    res = cli("stats", folder)
    lines = res.out.splitlines()
    assert res.code == 0 and lines[0] == f"collcheck stats: {folder}  (4 launches; --launch ID for one's tables)"
    assert [line.split()[:5] for line in lines[1:]] == [[i, ranks, "ranks", n, "collectives"] for i, ranks, n in
                                                        [("job-a", "2/2", "6"), ("job-b", "3/3", "9"),
                                                         ("pytest#1", "2/2", "6"), ("pytest#2", "2/2", "6")]]
    assert all(" s inside them  most: train.py:100 all_reduce 0.000 s" in line for line in lines[1:]), lines
    items = json.loads(cli("stats", folder, "--format", "json").out)
    alone = json.loads(cli("stats", folder / "b", "--format", "json").out)
    assert [x["launch"] for x in items] == IDS and items[1]["sites"] == alone["sites"]
    picked = json.loads(cli("stats", folder, "--launch", "job-b", "--format", "json").out)
    assert picked.pop("launch") == "job-b" and picked == alone
    assert cli("stats", folder, "--launch", "job-b").out == cli("stats", folder / "b").out


def test_export_and_tui_take_the_newest_launch_or_the_one_named(folder, tmp_path, monkeypatch):
    res = cli("export", folder, "-o", tmp_path / "trace.json")
    note = (f"{folder} holds 4 launches; using the newest, pytest#2 "
            f"(--launch ID picks another: {', '.join(IDS)})\n")
    assert (res.code, res.err) == (0, "collcheck export: " + note) and json.loads((tmp_path / "trace.json").read_text())
    res = cli("export", folder, "--launch", "job-b", "--format", "fr", "-o", tmp_path / "fr")
    assert (res.code, res.err, sorted(os.listdir(tmp_path / "fr"))) == (0, "", ["rank_0", "rank_1", "rank_2"])
    from collcheck.tui import app

    shown = []
    monkeypatch.setattr(app, "run_tui", lambda source: shown.append(source) or 0)
    assert cli("tui", folder, "--launch", "job-a").code == 0 and shown[-1].path == str(folder / "a")
    res = cli("tui", folder)
    assert res.err == "collcheck tui: " + note and shown[-1].path == str(folder / "t")
    assert len(shown[-1].found) == 2


def test_full_reports_stop_at_ten_and_ids_from_the_logs_are_escaped(tmp_path):
    """Twelve launches with findings: ten full reports, then one line for the rest; a run id with
    control characters and of any length is shown escaped and cut, on one line."""
    from collcheck.analysis.diff import analyse
    from collcheck.base.untrusted import one_line
    from collcheck.model import load_run
    from collcheck.report.launches import ID_CHARS, TextLaunches

    write(tmp_path / "b", "job-b", world=3, faults=[synth.Fault("shape_mismatch", 2, 1)])
    report = analyse(load_run(str(tmp_path / "b")))
    out = io.StringIO()
    ids = [f"bad\x1b[2J\n{k}" + "x" * 1000 for k in range(12)]
    text = TextLaunches(out, "D", ids)
    for launch in ids:
        text.add(launch, 3, report)
    text.finish()
    lines = out.getvalue().splitlines()
    shown = one_line(ids[0], ID_CHARS)
    assert shown.startswith("bad\\x1b[2J\\n0xxx") and shown.endswith("x…") and len(shown) < ID_CHARS + 10
    assert lines[1] == f"  MISMATCH    {shown}     3/3 ranks          9 collectives  " \
                       "tensor size mismatch: group 0, #1, culprit rank 2"
    assert "\x1b" not in out.getvalue() and out.getvalue().count("FIRST DIVERGENCE") == 10
    assert lines[-1] == "... 2 more launches with findings (--launch ID shows one's report, --format json all of them)"
    assert text.counts == {"findings": 12, "incomplete": 0, "clean": 0, "unreadable": 0}
