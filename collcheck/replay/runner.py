"""Run a plan on local processes under the recorder, analyse the replay's own logs, compare."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ..analysis.diff import Report, analyse
from ..analysis.hang import TIMEOUT_WORDS
from ..base.outputs import atomic_output, new_file, output_folder, subfolder
from ..logfile.reader import LogError
from ..model import Run, load_run
from .plan import Plan

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
STARTUP_S = 30.0  # interpreter + torch import + rendezvous, on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Outcome:
    status: str  # completed | hung | errored
    plan: Plan
    run: Run | None
    report: Report | None
    exit_codes: list
    outputs: list  # per replay rank: stderr tail
    directory: str
    wall_s: float
    killed: bool = False  # the replayer had to kill ranks at its deadline
    group_map: dict = field(default_factory=dict)  # replay group name -> recorded name

    def first_key(self):
        """The first finding in recorded ranks and group names."""
        if self.report is None or not self.report.findings:
            return None
        return finding_key(self.report.first, self.plan.rank_map, self.group_map)

    def blocked(self) -> dict:
        """recorded rank -> description of where it was blocked (from the replay's logs)."""
        out = {}
        if self.report is None:
            return out
        for r, st in sorted(self.report.hang.states.items()):
            orig = self.plan.rank_map[r] if r < len(self.plan.rank_map) else r
            if st.state == "finished" and not st.blocked:
                continue
            where = ""
            if st.blocked:
                e = st.blocked[0]
                label = f" [{e.label}]" if e.label else ""
                where = (f"in {e.describe()}{label} (collective #{e.position} of group "
                         f"{self.group_map.get(e.group, e.group)}) at {e.where()}")
                if e.error:
                    where += f": {e.error.splitlines()[0][:120]}"
            out[orig] = f"{st.state} {where}".strip()
        return out


def finding_key(f, rank_map=None, group_map=None) -> tuple:
    rm = (lambda r: rank_map[r] if rank_map is not None and 0 <= r < len(rank_map) else r)
    group = (group_map or {}).get(f.group, f.group)
    return (f.kind, group, f.position, tuple(sorted(rm(r) for r in f.ranks)))


def site_key(f, rank_map=None) -> tuple:
    """Call sites of the culprits' events (or the reference event): what minimization keeps."""
    sites = set()
    for r, e in f.events.items():
        if e is not None and e.site is not None and (r in f.ranks or not f.ranks):
            sites.add((os.path.basename(e.site[0]), e.site[1]))
    if not sites and f.expected is not None and f.expected.site is not None:
        sites.add((os.path.basename(f.expected.site[0]), f.expected.site[1]))
    return tuple(sorted(sites))


def run_plan(plan: Plan, directory: str, deadline_s: float | None = None, env: dict | None = None,
             verbose: bool = False) -> Outcome:
    """Replay `plan` on plan.world local processes; logs under `directory`/logs. Every file and
    folder in `directory` is made fresh (base/outputs.py): a link left there is never followed."""
    output_folder(directory)
    plan_path = os.path.join(directory, "plan.json")
    with atomic_output(plan_path, replace_link=True) as f:
        json.dump(plan.to_json(), f)
    run_id = f"replay-{os.getpid()}-{free_port()}"
    log_dir = subfolder(directory, "logs")
    base = dict(os.environ)
    for k in ("TORCHELASTIC_RUN_ID", "COLLCHECK_STACK", "TORCH_DISTRIBUTED_DEBUG", "REPLAY_TIMEOUT_S"):
        base.pop(k, None)
    base.update(COLLCHECK="1", COLLCHECK_DIR=log_dir, COLLCHECK_RUN_ID=run_id, MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(free_port()), WORLD_SIZE=str(plan.world), OMP_NUM_THREADS="1",
                PYTHONUNBUFFERED="1", COLLCHECK_HANG_SECONDS=str(max(plan.timeout_s * 0.8, 1.0)))
    if verbose:
        base["REPLAY_VERBOSE"] = "1"
    if plan.backend == "simnccl":  # the workers' gloo groups become simnccl ones (capture/use_simnccl.py)
        base["COLLCHECK_SIMNCCL"] = "1"
    base.update(env or {})
    procs, errs = [], []
    t0 = time.monotonic()
    for r in range(plan.world):
        err = new_file(os.path.join(directory, f"rank{r}.err"))
        e = dict(base, RANK=str(r), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(plan.world))
        procs.append(subprocess.Popen([sys.executable, WORKER, plan_path], env=e, stdout=err, stderr=subprocess.STDOUT,
                                      start_new_session=True))
        errs.append(err)
    if deadline_s is None:
        deadline_s = STARTUP_S + 1.5 * plan.world + 3 * plan.timeout_s  # startup grows with processes per core
    killed = False
    try:
        while any(p.poll() is None for p in procs):
            if time.monotonic() - t0 > deadline_s:
                killed = True
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGTERM)
                end = time.monotonic() + 3
                while any(p.poll() is None for p in procs) and time.monotonic() < end:
                    time.sleep(0.05)
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()
                break
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
    wall = time.monotonic() - t0
    outputs = []
    for err in errs:
        err.seek(0)
        outputs.append(err.read()[-4000:])
        err.close()
    codes = [p.returncode for p in procs]
    run_dir = os.path.join(log_dir, run_id)
    run = report = None
    if os.path.isdir(run_dir) and any(n.endswith(".msgpack") for n in os.listdir(run_dir)):
        try:
            run = load_run(run_dir, workers=1)
            report = analyse(run)
        except LogError as exc:
            outputs.append(f"replay logs unreadable: {exc}")
    outcome = Outcome("errored", plan, run, report, codes, outputs, directory, wall, killed)
    outcome.group_map = group_map(plan, run) if run is not None else {}
    outcome.status = classify(outcome)
    return outcome


def group_map(plan: Plan, run: Run) -> dict:
    """Replay group name -> recorded name, pairing each rank's group creations in order."""
    out = {"0": "0"}
    for r, acts in enumerate(plan.ranks):
        log = run.ranks.get(r)
        if log is None:
            continue
        recorded = [a.get("name") for a in acts if a["k"] == "new"]
        replayed = [c.name for c in log.creations if c.op in ("new", "split")]
        for a, b in zip(recorded, replayed):
            if a is not None and b is not None:
                out.setdefault(b, a)
    return out


def classify(o: Outcome) -> str:
    if o.report is None:
        return "errored"
    if o.killed:
        return "hung"
    if all(c == 0 for c in o.exit_codes) and not o.report.hang.waiting:
        return "completed"
    crashed = [c for c in o.exit_codes if c is not None and c < 0 and c != -signal.SIGTERM]
    if crashed:
        return "errored"
    texts = []
    for st in o.report.hang.states.values():
        texts += [e.error or "" for e in st.blocked]
        texts.append(st.detail)
    if any(w in t for t in texts for w in TIMEOUT_WORDS):
        return "hung"
    if o.report.hang.waiting and any(st.state in ("stuck", "killed-in-collective") for st in o.report.hang.states.values()):
        return "hung"
    return "errored"


def describe_exit(code) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"
