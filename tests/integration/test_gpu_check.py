"""benchmarks/gpu_check.py, the device check, in its CPU mode (`--device cpu --backend gloo`): real
torchrun jobs recorded under COLLCHECK=1, read through collcheck's reader and command line. Its
CUDA mode (the slow collective behind a GPU sleep, NCCL's Flight Recorder) needs a machine with a GPU."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def gpu_check(tmp_path: Path, *args: str, timeout: float = 240) -> tuple[int, dict[str, tuple[str, str]], str]:
    """Run the script in CPU mode, polling completions as on NCCL (COLLCHECK_COMPLETION=poll, required
    by --expect-polled), its temporary folder under tmp_path: (exit code, {check: (status, text)},
    all it printed)."""
    env = dict(os.environ, TMPDIR=str(tmp_path), COLLCHECK_COMPLETION="poll")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--device", "cpu", "--backend", "gloo", "--expect-polled", *args],
                          check=False, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    lines = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"(PASS|FAIL|SKIP)\s+(\d [\w ]+?)\s{2,}(.*)$", line)
        if m:
            lines[m[2]] = (m[1], m[3])
    return proc.returncode, lines, proc.stdout + proc.stderr


def assert_clean(tmp_path: Path, printed: str) -> None:
    """No traceback, no temporary folder left, no process of the check still running."""
    assert "Traceback" not in printed, printed
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("gpu-check-")]
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            left += [pid] if str(tmp_path) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") else []
        except OSError:
            continue
    assert left == [], left


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cpu_mode_records_every_kind_with_its_completion(tmp_path):
    code, lines, printed = gpu_check(tmp_path, "--checks", "kinds")
    assert code == 0, printed
    assert lines["1 kinds recorded"][0] == "PASS" and "12 kinds" in lines["1 kinds recorded"][1], printed
    assert "24 events" in lines["1 kinds recorded"][1]
    assert lines["1 completion"][0] == "PASS" and lines["1 cli view"][0] == "PASS", printed
    assert lines["1 polled"][0] == "PASS", printed
    assert lines["1 slow collective"][0] == "SKIP"  # no GPU delay in CPU mode
    assert "gpu_check: 4 passed, 0 failed, 1 skipped" in printed
    assert_clean(tmp_path, printed)


@pytest.mark.timeout(120)
def test_a_job_past_its_timeout_fails_in_one_line_and_leaves_nothing(tmp_path):
    """The job is killed with its rank (in a session of its own under torchrun) at --timeout."""
    code, lines, printed = gpu_check(tmp_path, "--checks", "kinds,fr", "--timeout", "3")
    assert code == 1, printed
    for name in ("1 kinds", "3 flight recorder"):
        assert lines[name][0] == "FAIL" and "ran past 3 s" in lines[name][1], printed
    assert "0 passed, 2 failed" in printed
    assert_clean(tmp_path, printed)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_kind_missing_from_the_log_fails_the_kinds_check(tmp_path):
    """--skip-kind: the job leaves barrier out, so the log lacks it; the log is read as before."""
    code, lines, printed = gpu_check(tmp_path, "--checks", "kinds", "--skip-kind", "barrier")
    assert code == 1, printed
    status, text = lines["1 kinds recorded"]
    assert status == "FAIL" and "not in the log: barrier, barrier (async_op=True)" in text, printed
    assert "22 events" in text and lines["1 cli view"] == ("PASS", "collcheck export shows the 22 events, ops and durations")
    assert_clean(tmp_path, printed)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_cpu_mode_passes_every_check(tmp_path):
    """Every check (kinds, cost, Flight Recorder) at toy sizes: the CPU mode of the device check."""
    code, lines, printed = gpu_check(tmp_path, "--rounds", "1", "--calls", "200", "--reps", "2", timeout=380)
    assert code == 0, printed
    for name in ("1 kinds recorded", "1 completion", "1 cli view", "2 cost", "3 flight recorder"):
        assert lines[name][0] == "PASS", (name, printed)
    assert re.search(r"[+-]\d+\.\d µs per all_reduce recorded", lines["2 cost"][1]), printed
    fr = lines["3 flight recorder"][1]
    assert "verdict clean on both" in fr and "same kinds in the same order" in fr, printed
    assert_clean(tmp_path, printed)
