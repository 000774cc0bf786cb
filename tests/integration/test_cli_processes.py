"""The command line as users run it, in processes of its own: exit codes, one line on bad input,
no traceback (the unit tests run `main(argv)` in-process: tests/unit/cli/test_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from collcheck import synth
from support.logbytes import bad_input, small_program


def cli(*args, module="collcheck"):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", ["missing-dir", "corrupt", "two-runs"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, case):
    proc = cli("diff", bad_input(tmp_path, case))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collcheck: error:"), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_clean_and_faulty_runs(tmp_path):
    prog = small_program(3)
    synth.write_run(str(tmp_path / "clean"), prog)
    proc = cli("diff", tmp_path / "clean", module="collcheck")
    assert proc.returncode == 0, proc.stderr
    synth.write_run(str(tmp_path / "bad"), prog, [synth.Fault("shape_mismatch", 2, 1)])
    proc = cli("diff", tmp_path / "bad", "--format", "json", module="collcheck")
    assert proc.returncode == 1, proc.stderr
    first = json.loads(proc.stdout)["findings"][0]
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("shape_mismatch", "0", 1, [2])
