"""`collcheck demo [NAME]`: record a scenario under torchrun, then print its diff."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

from ..base.errors import UsageError
from ..base.settings import Settings
from . import values

# scenarios/ lives in the source checkout beside the package (editable install: collcheck/cli/demo.py
# -> the checkout), else in the working directory; COLLCHECK_SCENARIOS overrides
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCENARIOS_DIR = Settings.from_env().scenarios or next(
    (d for d in (os.path.join(_CHECKOUT, "scenarios"), os.path.abspath("scenarios")) if os.path.isdir(d)),
    "scenarios")
DEFAULT_DEMO = "seed004_case4"
BACKENDS = ("gloo", "simnccl")


def add_parser(commands) -> None:
    p = commands.add_parser("demo", help=execute.__doc__)
    p.add_argument("name", nargs="?", default=DEFAULT_DEMO, help=f"scenario name (default {DEFAULT_DEMO})")
    p.add_argument("--dir", type=values.path, default=None, help="where to keep the logs (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the logs")
    p.add_argument("--backend", choices=BACKENDS, default="gloo",
                   help="simnccl: run it on the simulated NCCL backend (calls return at once, nothing is checked)")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Record a scenario under torchrun, then diff it."""
    return run_demo(args.name, args.dir, keep=args.keep, backend=args.backend)


def scenario_names() -> list[str]:
    if not os.path.isdir(SCENARIOS_DIR):
        return []
    return sorted(d for d in os.listdir(SCENARIOS_DIR) if os.path.isfile(os.path.join(SCENARIOS_DIR, d, "main.py")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scenario_meta(name: str) -> dict:
    """scenarios/NAME/scenario.json (nproc, valid, the backends it runs on, what to expect)."""
    folder = os.path.join(SCENARIOS_DIR, name)
    if not os.path.isfile(os.path.join(folder, "main.py")):
        raise UsageError(f"no scenario {name!r}; available: {', '.join(scenario_names()) or 'none'}")
    with open(os.path.join(folder, "scenario.json")) as f:
        return json.load(f)


def record_scenario(name: str, log_dir: str, timeout: float = 120, extra_env: dict | None = None):
    """Run scenarios/NAME under COLLCHECK=1 torchrun; return (torchrun exit code, run directory, output)."""
    folder = os.path.join(SCENARIOS_DIR, name)
    meta = scenario_meta(name)
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


def run_demo(name: str, directory: str | None, keep: bool = False, backend: str = "gloo") -> int:
    """Record the scenario, print its README and `collcheck diff` of the logs; 0 once diagnosed.
    `backend` simnccl: the scenario's groups are made on the simulated NCCL backend."""
    from ..analysis.diff import analyse
    from ..model import load_run
    from ..report import render

    if backend not in scenario_meta(name).get("backends", ["gloo"]):
        raise UsageError(f"scenario {name!r} does not run on {backend}")
    tmp = None
    if directory is None:
        tmp = directory = tempfile.mkdtemp(prefix="collcheck-demo-")
    try:
        readme = os.path.join(SCENARIOS_DIR, name, "README.md")
        print(f"collcheck demo: recording scenario {name!r} under COLLCHECK=1 torchrun on {backend} ...", flush=True)
        rc, run_dir, _ = record_scenario(name, directory,
                                         extra_env={"COLLCHECK_SIMNCCL": "1"} if backend == "simnccl" else None)
        print(f"torchrun exited with {rc}; logs in {run_dir}", flush=True)
        live = os.path.join(run_dir, "live-report.txt")
        if os.path.exists(live):  # what live mode told the job's stderr while it ran (docs/live.md)
            with open(live) as f:
                print(f"while it ran, live mode said: {f.readline().strip()} ...", flush=True)
        print(flush=True)
        if os.path.exists(readme):
            with open(readme) as f:
                print(f.read().strip() + "\n", flush=True)
        print(f"$ collcheck diff {run_dir}", flush=True)
        render(analyse(load_run(run_dir)), "text", sys.stdout, context=4)
        return 0  # the demo succeeded when it could diagnose the run, findings or not
    finally:
        if tmp and not keep:
            shutil.rmtree(tmp, ignore_errors=True)
