"""Shared helpers for the recorder tests: run worker programs under torchrun with COLLCHECK=1."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

PROGRAMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")


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
    recorded under real torchrun once per test session and shared by the scenario, replay and
    TUI tests (thread-safe, so fixtures may record several in parallel)."""
    from collcheck.demo import record_scenario

    def get(name: str):
        with _scenario_guard:
            lock = _scenario_locks.setdefault(name, threading.Lock())
        with lock:
            if name not in _scenario_runs:
                # mkdtemp, not tmp_path_factory.mktemp: several threads may record at once
                d = tempfile.mkdtemp(prefix=f"rec-{name}-", dir=tmp_path_factory.getbasetemp())
                _scenario_runs[name] = record_scenario(name, d, timeout=180)
            return _scenario_runs[name]

    return get
