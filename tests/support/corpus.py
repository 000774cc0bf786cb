"""The session's recordings: every scenario and test program that tests only read is run once
per test session, in background threads, in the order the selected tests first need them.

Tests name what they read with `@pytest.mark.recordings("name", ...)` (conftest.py prefetches
those as soon as collection ends, so recordings run while the unit tests do) and get it with the
`corpus` fixture: `corpus("every_op")` waits for that recording and returns its `Launch`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from .admission import Admission
from .jobs import (
    SCENARIOS,
    SESSION_ENV,
    Job,
    Launch,
    job,
    launch,
    program,
    scenario_script,
)

CAPPED_STEPS = 1200  # capped_divergence: rank 1 diverges at the world group's collective #1200
FILL_STEPS = 2000  # fill_log.py's steps: about 100 KB of log per rank (test_write_errors.py)
FASTPATH = "fastpath"  # the compiled recording path, built once (a recording every compiled job waits for)
FASTPATH_BUILD_TIMEOUT = 420
FULL = {"COLLCHECK_STACK": "full"}
SIM = {"COLLCHECK_SIMNCCL": "1"}
# live mode's own checks: group timeouts long enough that only live mode ends a hang
LIVE_ABORT = {"SCENARIO_TIMEOUT_S": "60", "COLLCHECK_LIVE_ACTION": "abort"}


class FastpathUnavailable(Exception):
    """No C++ compiler or ninja: tests of the compiled path are skipped, with this reason."""


def scenario_meta(name: str) -> dict:
    with open(SCENARIOS / name / "scenario.json") as f:
        return json.load(f)


def scenario_names() -> list[str]:
    return sorted(p.parent.name for p in SCENARIOS.glob("*/main.py"))


def scenario(name: str, backend: str = "gloo", env: dict | None = None, timeout: float = 180) -> Job:
    """scenarios/NAME as `collcheck demo` runs it; on gloo with full stacks (every label is checked
    against the framework on its stack)."""
    extra = dict(SIM if backend == "simnccl" else FULL, **(env or {}))
    return job(scenario_script(name), scenario_meta(name)["nproc"], env=extra, timeout=timeout)


def _declared() -> dict[str, Job]:
    jobs: dict[str, Job] = {}
    for name in scenario_names():
        jobs[f"scenario:{name}"] = scenario(name)
        if "simnccl" in scenario_meta(name).get("backends", ()):
            jobs[f"scenario:{name}@simnccl"] = scenario(name, "simnccl")
    for path in ("python", "compiled"):
        at = "" if path == "python" else "@compiled"
        compiled = path == "compiled"
        jobs["every_op" + at] = job(program("every_op.py"), compiled=compiled, timeout=100)
        jobs["ddp_join" + at] = job(program("ddp_join.py"), compiled=compiled, timeout=100)
        jobs["ddp_join_full" + at] = job(program("ddp_join.py"), env=FULL, compiled=compiled, timeout=100)
        jobs["frameworks" + at] = job(program("frameworks.py"), compiled=compiled, timeout=120)
        jobs["chains" + at] = job(program("chains.py"), args=("clean",), compiled=compiled, timeout=100)
        jobs["results" + at] = job(program("results.py"), compiled=compiled, timeout=60)
        jobs["fork_and_fail" + at] = job(program("fork_and_fail.py"), args=("break",), compiled=compiled, timeout=100)
        jobs["non_member" + at] = job(program("non_member.py"), 3, compiled=compiled, timeout=100)
        jobs["compiled_fn" + at] = job(program("compiled.py"), None, compiled=compiled, timeout=110)
        jobs["api_world1" + at] = job(program("api_world1.py"), None, compiled=compiled, timeout=50)
        jobs["no_future" + at] = job(program("no_future_world1.py"), None, args=("300",), compiled=compiled,
                                     timeout=100)
        for case in ("kill", "abort", "object"):
            jobs[f"crash_{case}" + at] = job(program("crash.py"), args=(case,), compiled=compiled, timeout=100)
    jobs["results_plain"] = job(program("results.py"), record=False, timeout=60)
    jobs["fill_log_plain"] = job(program("fill_log.py"), args=(FILL_STEPS,), record=False, timeout=90)
    jobs["chains_extra_forward"] = job(program("chains.py"), args=("extra_forward",), timeout=120)
    jobs["chains_helper_barrier"] = job(program("chains.py"), args=("helper_barrier",), timeout=120)
    jobs["p2p_then_missing"] = job(program("p2p_then_missing.py"), 3, timeout=100)
    jobs["batch_ring"] = job(program("batch_ring.py"), 3, timeout=100)
    jobs["fsdp_skip"] = job(program("fsdp_skip.py"), env=FULL)
    jobs["mesh_rank0_full_tensor"] = job(program("mesh_rank0_full_tensor.py"), 4, env=FULL)
    jobs["tp_branch"] = job(program("tp_branch.py"), env=FULL)
    jobs["fsdp_tp_ok"] = job(program("fsdp_tp_ok.py"), 4, env=FULL, timeout=180)
    jobs["fsdp_tp_rank0_full_tensor"] = job(program("fsdp_tp_ok.py"), 4, args=("rank0_full_tensor",), env=FULL,
                                            timeout=180)
    jobs["dcp_rank0"] = job(program("dcp_rank0.py"), args=("{dir}/checkpoint",), env=FULL)
    jobs["dcp_all"] = job(program("dcp_rank0.py"), args=("{dir}/checkpoint", "all"))
    for schedule in ("1f1b", "gpipe"):
        jobs[f"pipeline_ok_{schedule}"] = job(program("pipeline_ok.py"), env=dict(FULL, PP_SCHEDULE=schedule))
    jobs["pipeline_ragged"] = job(program("pipeline_ragged.py"), env=FULL)
    _frameworks(jobs)
    _blame_from_source(jobs)
    jobs["straggler"] = job(program("straggler.py"), 4, timeout=150)
    jobs["sync_then_work"] = job(program("sync_then_work.py"), timeout=150)
    jobs["many_groups"] = job(program("many_groups.py"), 4, timeout=150)
    capped = {"COLLCHECK_MAX_MB": "0.25"}
    jobs["capped_uneven"] = job(program("long_run.py"), args=("3000",), env=capped, timeout=180)
    jobs["capped_p2p"] = job(program("long_run.py"), args=("2000", "-1", "p2p"), env=capped, timeout=180)
    jobs["capped_divergence"] = job(program("long_run.py"), args=(CAPPED_STEPS + 10, CAPPED_STEPS),
                                    env={"COLLCHECK_MAX_MB": "0.1"}, timeout=180)
    jobs["capped_ddp@compiled"] = job(program("long_run.py"), args=("700", "690", "ddp"),
                                      env={"COLLCHECK_MAX_MB": "0.05"}, compiled=True, timeout=180)
    jobs["threads@compiled"] = job(program("threads_groups.py"), env={"COLLCHECK_MAX_MB": "0.2",
                                   "COLLCHECK_LIVE_INTERVAL": "0.05"}, compiled=True, timeout=150)
    jobs["simnccl_silent"] = job(program("simnccl_semantics.py"), args=("silent",), env=SIM, timeout=90)
    jobs["simnccl_ahead"] = job(program("simnccl_semantics.py"), args=("ahead",), env=SIM, timeout=90)
    jobs["polled@simnccl"] = job(program("polled_completion.py"), env=SIM, timeout=90)
    jobs["polled@gloo+poll"] = job(program("polled_completion.py"), env={"COLLCHECK_COMPLETION": "poll"},
                                   compiled=True, timeout=90)
    jobs["simnccl_p2p"] = job(program("simnccl_semantics.py"), 3, args=("p2p",), env=SIM, timeout=90)
    jobs["simnccl_ops_3"] = job(program("simnccl_ops.py"), 3, record=False, timeout=100)
    jobs["simnccl_ops_2"] = job(program("simnccl_ops.py"), 2, record=False, timeout=100)
    # torch's own Flight Recorder dumps (no collcheck): tests/integration/programs/fr_dump.py, fr_wrap.py
    for case, fmt, buffer in (("skip", "pickle", 2000), ("skip", "json", 2000), ("clean", "pickle", 6)):
        jobs[f"fr_dump_{case}_{fmt}"] = job(program("fr_dump.py"), args=("{dir}", case, fmt), record=False,
                                            env={"TORCH_FR_BUFFER_SIZE": str(buffer)}, timeout=100)
    for name in scenario_names():
        jobs[f"fr_scenario:{name}"] = job(program("fr_wrap.py"), scenario_meta(name)["nproc"],
                                          args=("{dir}", scenario_script(name), "60"), record=False, timeout=150)
    # live mode's timing: the report within seconds of the divergence, the job ended by its abort
    for name in scenario_names():
        if not scenario_meta(name)["valid"]:
            for backend in ("simnccl", "gloo"):
                env = dict(LIVE_ABORT, **(SIM if backend == "simnccl" else {}))
                jobs[f"live:{name}@{backend}"] = job(scenario_script(name), scenario_meta(name)["nproc"], env=env,
                                                     timeout=120, exclusive=True)
    jobs["watchdog"] = job(program("crash.py"), args=("watchdog",), env={"COLLCHECK_HANG_SECONDS": "1"}, timeout=100,
                           exclusive=True)
    jobs["watchdog@compiled"] = job(program("crash.py"), args=("watchdog",), env={"COLLCHECK_HANG_SECONDS": "1"},
                                    compiled=True, timeout=100, exclusive=True)
    jobs["scenario:seed004_case4@simnccl+torch19"] = scenario("seed004_case4", "simnccl",
                                                              env={"SIMNCCL_BARRIER_VALUE": "1"})
    return jobs


# The real-framework programs (tests/integration/test_framework_blame.py): "fw_<framework>_<case>"
FRAMEWORK_CASES = {
    "lightning": ("metric_rank0", "uneven", "ok"),
    "accelerate": ("main_only_gather", "uneven", "ok"),
    "transformers": ("early_stop", "ok"),
    "deepspeed": ("save_rank0", "ok"),  # not in the test extra: the tests skip without it
}


def _frameworks(jobs: dict[str, Job]) -> None:
    """Recorded with the default stacks, as a user would run them (their chains hold the
    frameworks' frames); the framework's import alone takes seconds per rank, DeepSpeed's first
    job also builds its CPU communication op."""
    for framework, cases in FRAMEWORK_CASES.items():
        for case in cases:
            folder = ("{dir}/out",) if framework in ("transformers", "deepspeed") else ()
            jobs[f"fw_{framework}_{case}"] = job(program(f"fw_{framework}.py"), args=(case, *folder),
                                                 timeout=240 if framework == "deepspeed" else 150)
    jobs["tp_world_allreduce"] = job(program("tp_world_allreduce.py"), 4, env=FULL, timeout=120)
    jobs["fsdp2_skip_backward"] = job(program("fsdp2_skip_backward.py"), env=FULL, timeout=120)


# Two camps that part at one slot, where only the program's source says which took a branch
# (tests/integration/test_blame_from_source.py): program -> (ranks, its folder argument or None,
# timeout). "blame_<case>" runs tests/integration/programs/blame_<case>.py with "bug",
# "blame_<case>_ok" its correct twin with "ok".
BLAME_PROGRAMS = {
    "helper": (2, None, 100),
    "env_download": (4, "{dir}", 120),
    "ddp_logger": (2, None, 100),
    "ddp_converged": (2, None, 100),
    "fsdp2_export": (2, None, 120),
    "dtensor_snapshot": (4, None, 120),
    "lightning_ckpt": (2, "{dir}", 150),
    "lightning_val": (2, None, 150),
    "accelerate_summary": (2, "{dir}", 150),
    "accelerate_empty_shard": (2, None, 150),
    "trainer_evaluate": (2, "{dir}/out", 150),
    "p2p_lost_send": (2, None, 100),
    "p2p_halo": (4, None, 120),
    "p2p_any_source": (3, None, 100),
}


def _blame_from_source(jobs: dict[str, Job]) -> None:
    """Recorded with the default stacks, as a user would run them."""
    for case, (nproc, folder, timeout) in BLAME_PROGRAMS.items():
        for variant, suffix in (("bug", ""), ("ok", "_ok")):
            args = (variant, folder) if folder else (variant,)
            jobs[f"blame_{case}{suffix}"] = job(program(f"blame_{case}.py"), nproc, args=args, timeout=timeout)


JOBS = _declared()


class Corpus:
    """Runs `JOBS` on demand, each once, `workers` at a time, into `root`."""

    def __init__(self, root: str, workers: int = 2, jobs: dict[str, Job] | None = None):
        self.root, self.jobs = root, dict(JOBS if jobs is None else jobs)
        self.workers = max(1, workers)
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="corpus")
        self.admission = Admission(self.workers)
        self.futures: dict[str, Future] = {}
        self.lock = threading.Lock()

    def prefetch(self, names) -> None:
        """Start making these, exclusive ones first (while the unit tests run, before the others)."""
        names = list(names)
        for name in sorted(names, key=lambda n: not (n in self.jobs and self.jobs[n].exclusive)):
            self._future(name)

    def __call__(self, name: str) -> Launch:
        return self._future(name).result()

    def fastpath(self) -> dict:
        """The environment that selects the compiled path, once it is built (FastpathUnavailable
        when it cannot be)."""
        return self._future(FASTPATH).result()

    def drain(self) -> None:
        """Wait until no recording runs (before a test whose own job's timing is under test)."""
        for f in list(self.futures.values()):
            f.exception()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)

    def summary(self) -> list[str]:
        """One line per recording made, the longest first, and the total: where the suite's time goes."""
        made = []
        for name, f in self.futures.items():
            if f.done() and not f.cancelled() and f.exception() is None and name != FASTPATH:
                made.append((name, f.result()))
        made.sort(key=lambda nl: -nl[1].seconds)
        lines = [f"{launch_.seconds:7.1f} s" + (f" {launch_.cpu_seconds:7.1f} s CPU" if launch_.cpu_seconds else "")
                 + f"  {name}" for name, launch_ in made]
        total = sum(launch_.seconds for _, launch_ in made)
        cpu = sum(launch_.cpu_seconds or 0 for _, launch_ in made)
        return lines + [f"{len(made)} shared recordings, {total:.0f} s of jobs" + (f", {cpu:.0f} s CPU" if cpu else "")
                        + f", {self.workers} at a time"]

    def _future(self, name: str) -> Future:
        with self.lock:
            if name not in self.futures:
                if name != FASTPATH and name not in self.jobs:
                    raise KeyError(f"no recording {name!r} in tests/support/corpus.py")
                if name != FASTPATH and self.jobs[name].compiled:
                    self._future_locked(FASTPATH)  # before the jobs that wait for it
                self._future_locked(name)
            return self.futures[name]

    def _future_locked(self, name: str) -> None:
        if name not in self.futures:
            self.futures[name] = self.pool.submit(self._make, name)

    def _make(self, name: str):
        if name == FASTPATH:
            return build_fastpath()
        job_ = self.jobs[name]
        if job_.compiled:
            self.futures[FASTPATH].result()  # raises FastpathUnavailable where it cannot be built
        folder = tempfile.mkdtemp(prefix=name.replace(":", "-").replace("@", "-") + "-", dir=self.root)
        self.admission.start(job_.exclusive)
        try:
            return launch(job_, folder)
        finally:
            self.admission.done(job_.exclusive)


def build_fastpath() -> dict:
    """`collcheck build-fastpath` (the command users run), into torch's extension directory; its
    build is named by a hash of the sources, torch and Python, so one found there is this tree's."""
    from collcheck.capture.native.fastpath import missing_tools

    missing = missing_tools()
    if missing:
        raise FastpathUnavailable(f"no {' / '.join(missing)} on PATH: the compiled fast path cannot be built here")
    env = {k: v for k, v in SESSION_ENV.items() if k != "TORCH_EXTENSIONS_DIR"}
    env["COLLCHECK_FASTPATH"] = "auto"
    cmd = [sys.executable, "-m", "collcheck", "build-fastpath"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=FASTPATH_BUILD_TIMEOUT, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"building the fast path failed:\n{proc.stderr[-4000:]}")
    # it prints the library it built (or found); `--status` is tested in test_fastpath.py, and every
    # compiled job's test checks that the job said it recorded with it
    library = (proc.stdout.strip().splitlines() or [""])[-1]
    if not os.path.isfile(library):
        raise RuntimeError(f"built, yet no library: {proc.stdout} {proc.stderr}")
    return {"COLLCHECK_FASTPATH": "1"}


def cleanup(root: str) -> None:
    if not os.environ.get("COLLCHECK_TEST_KEEP"):
        shutil.rmtree(root, ignore_errors=True)


def params(names, key, slow=(), default=None):
    """pytest parameters, one per name, each marked with the recording `key(name)` it reads; the
    names in `slow` (or not in `default`, when given) run with -m slow."""
    import pytest

    out = []
    for n in names:
        marks = [pytest.mark.recordings(key(n))]
        if n in slow or (default is not None and n not in default):
            marks.append(pytest.mark.slow)
        out.append(pytest.param(n, marks=marks, id=n))
    return out
