"""A log cut by a write error says so, and the job goes on unchanged: a real 2-rank torchrun job
records onto a file system that fills mid-run (a small tmpfs, where this process may mount one: a
real ENOSPC), or under a file size limit (RLIMIT_FSIZE: the kernel's EFBIG). The job prints what an
unrecorded run prints; each log ends with the record saying why recording stopped; `collcheck
diff` finds no hang in that finished job and names the write failure (exit 4: ranks not checked
to the end)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess

import pytest

from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log
from collcheck.model import load_run
from support.cli import run_cli
from support.corpus import FILL_STEPS
from support.jobs import job, launch, log_files, program

DISK_BYTES = 128 << 10  # the small file system both ranks' logs share: about 100 KB each would be needed
FILE_BYTES = 64 << 10  # the file size limit of the other variant
ERRORS = {"small-disk": ("ENOSPC", "No space left on device"), "file-size-limit": ("EFBIG", "File too large")}


@contextlib.contextmanager
def small_file_system(path, size: int):
    """A tmpfs of `size` bytes mounted at `path`, unmounted after; None where this process may
    not mount one (not root, no CAP_SYS_ADMIN in a container)."""
    os.makedirs(path, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        yield None
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def per_rank(stdout: str) -> dict:
    out: dict = {}
    for line in stdout.splitlines():
        rank, _, rest = line.partition(" ")
        if rank.isdigit():
            out.setdefault(int(rank), []).append(rest)
    return out


@pytest.mark.timeout(240)
@pytest.mark.recordings("fill_log_plain")
@pytest.mark.parametrize("how", ["small-disk", pytest.param("file-size-limit", marks=pytest.mark.slow),
                                 pytest.param("small-disk@compiled", marks=pytest.mark.slow)])
def test_a_log_cut_by_a_write_error_says_so_and_the_job_is_unchanged(tmp_path, corpus, request, how):
    compiled = how.endswith("@compiled")
    env = request.getfixturevalue("fastpath_env") if compiled else {}
    kind = how.split("@")[0]
    with small_file_system(tmp_path / "disk", DISK_BYTES) as disk:
        if disk is None:  # (no tmpfs here: the kernel's file size limit is the write error)
            kind = "file-size-limit"
        limit = FILE_BYTES if kind == "file-size-limit" else 0
        rec = launch(job(program("fill_log.py"), args=(FILL_STEPS,), env=env, compiled=compiled,
                         max_file_bytes=limit, timeout=120), str(disk or tmp_path / "logs"))
        _check_job(rec, corpus("fill_log_plain"), compiled)
        _check_logs(rec.run_dir, kind, limit)
        _check_diff(rec.run_dir, kind)


def _check_job(rec, plain, compiled: bool) -> None:
    """The job ran to its end and printed what the unrecorded run printed; each rank said once, on
    stderr, that its recording stopped."""
    assert plain.rc == 0, plain.tail()
    assert rec.rc == 0, rec.tail()
    assert per_rank(rec.stdout) == per_rank(plain.stdout) and f"done: {FILL_STEPS}" in rec.stdout
    assert rec.stderr.count("collcheck: recording stopped: could not write") == 2, rec.stderr[-3000:]
    assert "Traceback" not in rec.stderr and "disabled after an internal error" not in rec.stderr, rec.stderr[-3000:]
    if compiled:
        assert "compiled fast path in use" in rec.stderr, rec.stderr[-3000:]


def _check_logs(run_dir: str, kind: str, limit: int) -> None:
    """Each log ends with the Q record naming the error, within the room kept for it."""
    name, words = ERRORS[kind]
    paths = log_files(run_dir)
    assert len(paths) == 2
    for path in paths:
        raw = read_log(path)
        assert not raw.damage and not raw.torn, (path, raw.damage)
        last = raw.records[-1]
        assert last["k"] == lf.DISABLED and last["e"] == name and words in last["m"], last
        assert not any(r["k"] == lf.TRAILER for r in raw.records)
        if limit:
            assert os.path.getsize(path) <= limit
    run = load_run(run_dir)
    for r, log in run.ranks.items():
        assert log.state == "recording-stopped" and log.stop_error == name, (r, log.state)
        assert 100 < len(log) < FILL_STEPS and not log.pending  # neither waiting nor killed inside a collective


def _check_diff(run_dir: str, kind: str) -> None:
    """No hang in a job that finished: the ranks are unknown after their last record, the report
    says why, and the exit code is 4 (not checked to the end), not 1."""
    name, words = ERRORS[kind]
    text = run_cli("diff", run_dir, columns=250)
    assert text.code == 4, (text.code, text.out, text.err)
    assert "verdict: INCOMPLETE" in text.out and "HANG" not in text.out, text.out
    assert "recording stopped after" in text.out and f"{words} ({name})" in text.out, text.out
    assert "checked up to #" in text.out and "recording stopped there" in text.out, text.out
    res = run_cli("diff", run_dir, "--format", "json")
    report = json.loads(res.out)
    assert res.code == 4 and report["verdict"] == "incomplete" and report["findings"] == [], report["findings"]
    for state in report["ranks"].values():
        assert state["state"] == "recording-stopped" and words in state["detail"] and not state["blocked_in"]
    assert not report["wait_for"] and not report["root_causes"]
