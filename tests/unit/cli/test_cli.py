"""The command line's argument handling and error path, in-process (`main(argv)`): every bad input
is one line and exit 2, findings exit 1, clean runs 0, unchecked ranks 4."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from collcheck import synth
from support.cli import run_cli
from support.logbytes import BAD_INPUTS, SEVERAL_LAUNCHES, bad_input, small_program


@pytest.mark.parametrize(("case", "command"), [(case, command) for command in ["diff", "stats", "show", "export"]
                                               for case in BAD_INPUTS] + [(case, "show") for case in SEVERAL_LAUNCHES])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case, command):
    target = bad_input(tmp_path, case)
    extra = ("-o", str(tmp_path / "out")) if command == "export" else ()
    res = run_cli(command, target, *extra)
    assert res.code == 2, (res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collcheck: error:"), res.err
    if command == "diff" and case == "unknown-version":
        assert "upgrade" in lines[0]


@pytest.mark.parametrize("argv", [[], ["nonsense"], ["diff"], ["diff", "x", "--format", "yaml"],
                                  ["show", "x", "--limit", "many"], ["replay"], ["demo", "--backend", "mpi"]])
def test_usage_errors_exit_2(argv, capsys):
    assert run_cli(*argv).code == 2


def test_version_exits_0():
    assert run_cli("--version").code == 0


def test_exit_codes_follow_the_verdict(tmp_path):
    prog = small_program(3)
    synth.write_run(str(tmp_path / "clean"), prog)
    assert run_cli("diff", tmp_path / "clean").code == 0
    synth.write_run(str(tmp_path / "bad"), prog, [synth.Fault("shape_mismatch", 2, 1)])
    res = run_cli("diff", tmp_path / "bad", "--format", "json")
    assert res.code == 1, res.err
    first = json.loads(res.out)["findings"][0]
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("shape_mismatch", "0", 1, [2])
    assert run_cli("diff", tmp_path / "bad", "--exit-zero").code == 0
    out = tmp_path / "report.xml"
    assert run_cli("diff", tmp_path / "bad", "--format", "junit", "-o", out).code == 1 and out.read_text().startswith("<")
    # a logs root: the newest run in it
    assert run_cli("diff", tmp_path).code in (0, 1)


def test_a_missing_rank_is_incomplete_exit_4(tmp_path):
    paths = synth.write_run(str(tmp_path / "run"), small_program(3))
    import os

    os.remove(paths[2])
    res = run_cli("diff", tmp_path / "run", "--format", "json")
    assert res.code == 4, (res.out, res.err)
    assert json.loads(res.out)["verdict"] == "incomplete"


def test_demo_finds_the_checkouts_scenarios_from_any_directory(tmp_path):
    """`collcheck demo` run outside the checkout (an editable install) still finds its scenarios:
    an unknown name lists them, one line, exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "COLLCHECK_SCENARIOS"}
    proc = subprocess.run([sys.executable, "-m", "collcheck", "demo", "no_such_scenario"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    line, = proc.stderr.strip().splitlines()
    assert "no scenario 'no_such_scenario'" in line and "seed004_case4" in line, line
