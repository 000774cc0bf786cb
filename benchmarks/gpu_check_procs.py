"""The processes of benchmarks/gpu_check.py: each command in a session of its own with a time
limit, its output in files, and killed with everything it started when the limit passes."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess

from gpu_check_views import Failed


def run_process(cmd: list[str], env: dict, timeout: float, tmp: str, name: str, what: str):
    """`cmd` run in `tmp`, its output in files there (a rank left behind cannot hold a pipe open);
    past `timeout` it is killed with every process it started (Failed says so)."""
    out, err = (os.path.join(tmp, f"{name}.{ext}") for ext in ("out", "err"))
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe, start_new_session=True, cwd=tmp)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()
            raise Failed(f"{what} ran past {timeout:.0f} s (--timeout, --budget) and was killed") from None
        except BaseException:  # Ctrl-C: the job's ranks are in sessions of their own and did not get it
            kill_tree(proc.pid)
            proc.wait()
            raise
    with open(out, errors="replace") as fo, open(err, errors="replace") as fe:
        return subprocess.CompletedProcess(cmd, proc.returncode, fo.read(), fe.read())


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`'s process group and every process below it (torchrun starts each rank in a
    session of its own), found in /proc before any of them dies."""
    below, parents = [], {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        try:
            with open(f"/proc/{entry}/stat") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    frontier = [pid]
    while frontier:
        kids = [p for p, parent in parents.items() if parent in frontier]
        below += kids
        frontier = kids
    for kill, target in [(os.killpg, pid)] + [(os.kill, p) for p in below]:
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def free_port() -> int:
    """A free port below Linux's ephemeral range (gloo's connections cannot take it back)."""
    while True:
        port = random.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def last_line(text: str) -> str:
    """The last line of a command's output that says something (not a rule of = or -)."""
    lines = [ln.strip() for ln in text.splitlines() if any(ch.isalnum() for ch in ln)]
    return lines[-1][:300] if lines else "(no output)"


def why_job_failed(text: str) -> str:
    """What a torchrun job's output says went wrong: its rank's last error line (torchrun prefixes
    them with [rank0]:), else the exit code of its summary, else its last line."""
    lines = text.splitlines()
    ranks = [ln.strip() for ln in lines if ln.startswith("[rank") and any(ch.isalnum() for ch in ln[7:])]
    exits = [ln.strip() for ln in lines if ln.strip().startswith("exitcode")]
    return (ranks or exits or [last_line(text)])[-1][:300]
