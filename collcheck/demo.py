"""`collcheck demo [NAME]`: record a scenario under torchrun, then print its diff."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile

from .cli import SCENARIOS_DIR, UsageError


def scenario_names() -> list[str]:
    if not os.path.isdir(SCENARIOS_DIR):
        return []
    return sorted(d for d in os.listdir(SCENARIOS_DIR) if os.path.isfile(os.path.join(SCENARIOS_DIR, d, "main.py")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record_scenario(name: str, log_dir: str, timeout: float = 120, extra_env: dict | None = None):
    """Run scenarios/NAME under COLLCHECK=1 torchrun; return (torchrun exit code, run directory, output)."""
    folder = os.path.join(SCENARIOS_DIR, name)
    if not os.path.isfile(os.path.join(folder, "main.py")):
        raise UsageError(f"no scenario {name!r}; available: {', '.join(scenario_names()) or 'none'}")
    with open(os.path.join(folder, "scenario.json")) as f:
        meta = json.load(f)
    run_id = f"{name}-{os.getpid()}-{free_port()}"
    env = dict(os.environ, COLLCHECK="1", COLLCHECK_DIR=log_dir, COLLCHECK_RUN_ID=run_id,
               OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **(extra_env or {}))
    env.pop("TORCHELASTIC_RUN_ID", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(meta["nproc"]),
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), os.path.join(folder, "main.py")]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, output = -1, f"timed out after {timeout} s: {exc}"
    return rc, os.path.join(log_dir, run_id), output


def run_demo(name: str, directory: str | None, keep: bool = False) -> int:
    from .cli import main as cli_main

    tmp = None
    if directory is None:
        tmp = tempfile.mkdtemp(prefix="collcheck-demo-")
        directory = tmp
    readme = os.path.join(SCENARIOS_DIR, name, "README.md")
    print(f"collcheck demo: recording scenario {name!r} under COLLCHECK=1 torchrun ...", flush=True)
    rc, run_dir, _ = record_scenario(name, directory)
    print(f"torchrun exited with {rc}; logs in {run_dir}\n", flush=True)
    if os.path.exists(readme):
        with open(readme) as f:
            print(f.read().strip() + "\n", flush=True)
    print(f"$ collcheck diff {run_dir}", flush=True)
    code = cli_main(["diff", run_dir])
    if tmp and not keep:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if code in (0, 1) else code  # the demo succeeded when it could diagnose the run
