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


@pytest.mark.parametrize("case", ["missing-dir", "corrupt", "unknown-version"])
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


ONE_RANK_JOB = """
import socket, sys
import torch, torch.distributed as dist
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
dist.all_reduce(torch.ones(4))
dist.destroy_process_group()
sys.exit(7)
"""


def test_record_runs_the_command_with_recording_on_and_says_where_the_logs_are(tmp_path, monkeypatch):
    """`collcheck record [--] COMMAND` as the README shows it: the command's exit code, one log per
    rank under --dir/<a fresh run id>, and that directory named on stderr."""
    monkeypatch.delenv("COLLCHECK_RUN_ID", raising=False)
    proc = cli("record", "--dir", tmp_path / "logs", "--", sys.executable, "-c", ONE_RANK_JOB)
    assert proc.returncode == 7, proc.stderr
    said = proc.stderr.strip().splitlines()[-1]
    runs = list((tmp_path / "logs").iterdir())
    assert len(runs) == 1 and said == f"collcheck: logs in {runs[0]} (command exited with 7)", proc.stderr
    assert [p.name for p in runs[0].iterdir() if p.suffix == ".msgpack"] == ["rank-00000.0.msgpack"]
    assert cli("diff", runs[0]).returncode == 0
