"""Real jobs for the integration tests: a program under `torchrun` (or plain Python) with
COLLCHECK=1, its output and its run directory.

A `Job` says what to run; `launch` runs it in a session of its own, so that a job past its
timeout is killed with every process it started (torchrun's agent, its ranks, their helpers).
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "integration" / "programs"
SCENARIOS = ROOT / "scenarios"
# The environment jobs start from, as the session began: tests change os.environ for a moment
# (run_cli's COLUMNS, XDG_CACHE_HOME) while recordings start in other threads.
SESSION_ENV = dict(os.environ)
# Jobs record on the pure-Python path (what a fresh install runs) unless they ask for the compiled
# one (Job.compiled): a build found in torch's extension cache must not decide what is tested.
SESSION_ENV.setdefault("COLLCHECK_FASTPATH", "0")
# the first job compiles collcheck's modules once for all (each rank would compile them again)
SESSION_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
# variables a job must not inherit from the shell that runs the tests
SCRUBBED = ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "COLLCHECK_HANG_SECONDS", "COLLCHECK_STACK",
            "COLLCHECK_SIMNCCL", "COLLCHECK_LIVE", "COLLCHECK_LIVE_ACTION", "COLLCHECK_MAX_MB",
            "TORCHELASTIC_RUN_ID", "TORCH_DISTRIBUTED_DEBUG", "PYTHONFAULTHANDLER")


_ports = itertools.count((os.getpid() * 97) % 12000)  # ports 20000-31999: below Linux's ephemeral range
_ports_lock = threading.Lock()


def free_port() -> int:
    """A port no other job of this session was given, outside the range the kernel hands out to
    outgoing connections: several jobs run at once, and a port taken from that range can be taken
    back by one of their gloo connections before torchrun's store binds it."""
    with _ports_lock:
        while True:
            port = 20000 + next(_ports) % 12000
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port


def program(name: str) -> str:
    return str(PROGRAMS / name)


def scenario_script(name: str) -> str:
    return str(SCENARIOS / name / "main.py")


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


def base_env(log_dir, record: bool = True, extra: dict | None = None, run_id: str | None = None) -> dict:
    """The test's environment minus collcheck's and torch's debugging settings; COLLCHECK=1 into
    `log_dir` when `record`; then `extra`."""
    env = dict(SESSION_ENV, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for key in SCRUBBED:
        env.pop(key, None)
    if record:
        env.update(COLLCHECK="1", COLLCHECK_DIR=str(log_dir), COLLCHECK_RUN_ID=run_id or f"run-{free_port()}")
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Job:
    """One program run: `nproc` ranks under torchrun (`nproc` None: one plain Python process,
    given the log directory and a free port as its first two arguments). "{dir}" in an argument
    is the launch's own directory."""

    script: str
    nproc: int | None = 2
    args: tuple = ()
    env: tuple = ()  # (name, value) pairs, sorted: a Job is hashable
    timeout: float = 120
    record: bool = True
    compiled: bool = False  # the compiled recording path (built once per session)
    # its timing is under test: at most one other shared recording runs beside it (these are
    # made first, while the unit tests run: support/admission.py)
    exclusive: bool = False
    # RLIMIT_FSIZE of the job's processes, SIGXFSZ ignored: a write past it fails with EFBIG (0: none)
    max_file_bytes: int = 0

    def environment(self) -> dict:
        return dict(self.env, COLLCHECK_FASTPATH="1" if self.compiled else "0")


def job(script: str, nproc: int | None = 2, *, args=(), env: dict | None = None, **kw) -> Job:
    return Job(script, nproc, tuple(str(a) for a in args), tuple(sorted((env or {}).items())), **kw)


@dataclass
class Launch:
    """What a job left: torchrun's exit code (None: it ran past its timeout and was killed), its
    output, the run directory of its logs (None when not recorded)."""

    job: Job
    rc: int | None
    stdout: str
    stderr: str
    run_dir: str | None
    folder: str  # the launch's own directory
    seconds: float = 0.0
    cpu_seconds: float | None = None  # user + system of the whole job, with COLLCHECK_TEST_PROFILE=1
    ended_wall: float = 0.0  # time.time() when it ended

    def __post_init__(self):
        if self.run_dir and not os.path.isdir(self.run_dir) and os.environ.get("COLLCHECK_TEST_DEBUG"):
            print(f"\n[no run dir for {self.job.script} {self.job.args}]\n{self.tail()}", file=sys.stderr)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def tail(self, n: int = 3000) -> str:
        return f"rc {self.rc} after {self.seconds:.1f} s\n{self.stdout[-n:]}\n{self.stderr[-n:]}"


# runs argv[2:] with its files limited to argv[1] bytes (the kernel's RLIMIT_FSIZE: a write past it
# fails with EFBIG, SIGXFSZ ignored): an exec, so no preexec_fn runs in a process with threads
FILE_LIMIT = ("import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); n = int(sys.argv[1]); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); os.execv(sys.argv[2], sys.argv[2:])")


def command(job_: Job, log_dir: str) -> list[str]:
    args = [a.replace("{dir}", str(log_dir)) for a in job_.args]
    limit = [sys.executable, "-c", FILE_LIMIT, str(job_.max_file_bytes)] if job_.max_file_bytes else []
    if job_.nproc is None:
        return [*limit, sys.executable, job_.script, str(log_dir), str(free_port()), *args]
    return [*limit, sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(job_.nproc), "--master-addr",
            "127.0.0.1", "--master-port", str(free_port()), "--max-restarts", "0", job_.script, *args]


def launch(job_: Job, log_dir: str, run_id: str | None = None, cwd: str | None = None) -> Launch:
    """Run `job_` to its end, or kill its whole process tree at its timeout."""
    os.makedirs(log_dir, exist_ok=True)
    run_id = run_id or f"run-{os.getpid()}-{free_port()}"
    env = base_env(log_dir, job_.record and job_.nproc is not None, job_.environment(), run_id)
    cmd, cpu_file = command(job_, log_dir), None
    if os.environ.get("COLLCHECK_TEST_PROFILE") and os.path.exists("/usr/bin/time"):
        cpu_file = log_dir.rstrip("/") + ".cpu"  # the job's CPU, its ranks' included (torchrun reaps them)
        cmd = ["/usr/bin/time", "-f", "%U %S", "-o", cpu_file, *cmd]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, cwd=cwd or log_dir)
    try:
        out, err = proc.communicate(timeout=job_.timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        out, err = proc.communicate()
        rc, err = None, err + f"\n[killed after {job_.timeout} s]"
    kill_group(proc.pid)  # whatever it left behind
    if job_.nproc is None:
        run_dir = log_dir  # the program records (or not) through collcheck's API, where it says
    else:
        run_dir = os.path.join(log_dir, run_id) if job_.record else None
    return Launch(job_, rc, out, err, run_dir, str(log_dir), time.monotonic() - start, _cpu(cpu_file), time.time())


def _cpu(path: str | None) -> float | None:
    try:
        with open(path) as f:
            return sum(float(x) for x in f.read().split()[-2:])
    except (OSError, TypeError, ValueError):
        return None


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
