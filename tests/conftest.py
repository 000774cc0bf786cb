"""Shared helpers for the recorder tests: run worker programs under torchrun with COLLCHECK=1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
FASTPATH_BUILD_TIMEOUT = 420

# Recorded jobs use the pure-Python recording path (what a fresh install runs) unless a test asks
# for the compiled one: a fast path built earlier into torch's extension cache on this machine
# must not decide what the suite tests. `fastpath_env` gives the compiled path, built afresh.
os.environ.setdefault("COLLCHECK_FASTPATH", "0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def program(name: str) -> str:
    return os.path.join(PROGRAMS, name)


def base_env(log_dir, record: bool = True, extra: dict | None = None, run_id: str | None = None) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="")
    for k in ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "COLLCHECK_HANG_SECONDS", "COLLCHECK_STACK",
              "TORCHELASTIC_RUN_ID", "TORCH_DISTRIBUTED_DEBUG", "PYTHONFAULTHANDLER"):
        env.pop(k, None)
    if record:
        env.update(COLLCHECK="1", COLLCHECK_DIR=str(log_dir), COLLCHECK_RUN_ID=run_id or f"run-{free_port()}")
    env.update(extra or {})
    return env


def torchrun(script: str, nproc: int, log_dir, env: dict | None = None, timeout: float = 90, record: bool = True,
             args: tuple = ()):
    """Run `script` on `nproc` local ranks under torchrun (COLLCHECK=1 unless record=False).

    Returns (returncode, stdout, stderr, run_dir); run_dir is None when not recording."""
    run_id = f"run-{os.getpid()}-{free_port()}"
    full_env = base_env(log_dir, record, env, run_id)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
           "127.0.0.1", "--master-port", str(free_port()), "--max-restarts", "0", script, *args]
    try:
        proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"torchrun {os.path.basename(script)} timed out after {timeout} s:\n"
                    f"{(exc.stdout or b'')[-3000:]!r}\n{(exc.stderr or b'')[-3000:]!r}")
    run_dir = os.path.join(str(log_dir), run_id) if record else None
    return proc.returncode, proc.stdout, proc.stderr, run_dir


def diff_json(run_dir: str, timeout: float = 300) -> tuple[int, dict]:
    """`collcheck diff RUN --format json` in a subprocess: (exit code 0 or 1, the report)."""
    proc = subprocess.run([sys.executable, "-m", "collcheck.cli", "diff", run_dir, "--format", "json"],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def marker_lines(script: str) -> dict[str, int]:
    """`# @name` comments in a program -> their line numbers (the call-site lines)."""
    found = {}
    with open(script) as f:
        for n, line in enumerate(f, 1):
            if "# @" in line:
                name = line.split("# @", 1)[1].split()[0]
                assert name not in found, f"duplicate marker {name}"
                found[name] = n
    return found


def log_files(run_dir: str) -> list[str]:
    return sorted(os.path.join(run_dir, f) for f in os.listdir(run_dir) if f.endswith(".msgpack"))


_scenario_runs: dict = {}
_scenario_locks: dict = {}
_scenario_guard = threading.Lock()


@pytest.fixture(scope="session")
def scenario_run(tmp_path_factory):
    """`scenario_run(name)` -> (torchrun rc, run dir, output): each scenario in scenarios/ is
    recorded (with full stacks) under real torchrun once per test session and shared by the scenario, replay and
    TUI tests (thread-safe, so fixtures may record several in parallel)."""
    from collcheck.demo import record_scenario

    def get(name: str):
        with _scenario_guard:
            lock = _scenario_locks.setdefault(name, threading.Lock())
        with lock:
            if name not in _scenario_runs:
                # mkdtemp, not tmp_path_factory.mktemp: several threads may record at once
                d = tempfile.mkdtemp(prefix=f"rec-{name}-", dir=tmp_path_factory.getbasetemp())
                # full stacks: test_scenarios checks each label against the framework on its stack
                _scenario_runs[name] = record_scenario(name, d, timeout=180, extra_env={"COLLCHECK_STACK": "full"})
            return _scenario_runs[name]

    return get


@pytest.fixture(scope="session")
def fastpath_env() -> dict:
    """Environment for jobs on the compiled fast path, built once into torch's extension directory
    as users build it (skipped with the reason when no C++ compiler or ninja is found). The build's
    name hashes the sources, torch and Python: one found there is a build of exactly this tree."""
    from collcheck.capture.fastpath import missing_tools

    missing = missing_tools()
    if missing:
        pytest.skip(f"no {' / '.join(missing)} on PATH: the compiled fast path cannot be built here")
    env = {"COLLCHECK_FASTPATH": "auto"}
    base = {k: v for k, v in os.environ.items() if k != "TORCH_EXTENSIONS_DIR"}
    cmd = [sys.executable, "-m", "collcheck", "build-fastpath"]  # the command users run
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=FASTPATH_BUILD_TIMEOUT, env=dict(base, **env))
    except subprocess.TimeoutExpired:
        pytest.fail(f"building the fast path took more than {FASTPATH_BUILD_TIMEOUT} s")
    assert proc.returncode == 0, proc.stderr[-4000:]
    status = subprocess.run([*cmd, "--status"], capture_output=True, text=True, timeout=60, env=dict(base, **env))
    assert status.returncode == 0 and "in use: new jobs record with the compiled path" in status.stdout, status
    check = "from collcheck.capture import fastpath; print(fastpath.load() is not None)"
    proc = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60,
                          env=dict(base, **env))
    assert proc.stdout.split() == ["True"], proc.stderr[-3000:]
    return env
