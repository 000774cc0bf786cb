"""`python benchmarks/gpu_check.py`: the device check, on a machine with one CUDA GPU (`--device cpu
--backend gloo`: the same checks on CPU, where no GPU makes a collective slow).

Every job is a real child process, `python -m torch.distributed.run --nproc-per-node 1
benchmarks/gpu_check_job.py ...` (world size 1: NCCL refuses two ranks on one GPU), recorded with
COLLCHECK=1 into a folder of its own under a temporary folder, removed at the end (`--keep`: kept).
What is read comes through collcheck's command line and its log reader only.

1. kinds: one job issues every collective kind, blocking and with async_op=True (send/recv need two
   ranks: not issued). Each kind is in the log; each event has a completion time, not before its
   issue (in CPU mode, at least its return time: torch's gloo Work of a reduce-scatter never
   reports completion); the command line's export shows the same events at the same times; the groups'
   completions are polled (the header's `poll_ms`, `cp: 1` on each group: on CUDA, or with
   --expect-polled); on CUDA, all_reduces behind a GPU sleep complete no earlier than the sleep
   allows (the check that fails when completion is taken at enqueue).
2. cost: plain and COLLCHECK=1 launches of N small all_reduces alternate, `--rounds` times; the
   figure is the median over rounds of (recorded - plain) microseconds per call. Reported only.
3. flight recorder: the kinds job also dumps torch's Flight Recorder (TORCH_FR_BUFFER_SIZE);
   `collcheck diff`, `show` and `export` on the dump and on collcheck's log must agree: the same
   exit code and verdict, the same kinds of ops in the same order in each group.

Prints one PASS / FAIL / SKIP line per check and a summary; exit 0 only when no check failed
(1: a check failed, 2: it could not run here).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "gpu_check_job.py")
sys.path.insert(0, HERE)
from gpu_check_procs import (  # (beside this script)
    free_port,
    last_line,
    run_process,
    why_job_failed,
)
from gpu_check_views import (
    Failed,
    compare_sequences,
    export_events,
    load_json,
    read_events,
    sequences_of,
    show_sequences,
    the_log,
)

# the collective kinds the job issues and the wire op collcheck records for each (torch 2.13's c10d ops)
WIRE = {"all_reduce": "allreduce_", "broadcast": "broadcast_", "reduce": "reduce_", "all_gather": "allgather_",
        "all_gather_into_tensor": "_allgather_base_", "reduce_scatter_tensor": "_reduce_scatter_base_",
        "reduce_scatter": "reduce_scatter_", "all_to_all_single": "alltoall_base_", "all_to_all": "alltoall_",
        "barrier": "barrier", "gather": "gather_", "scatter": "scatter_"}
CHECKS = ("kinds", "cost", "fr")
DROPPED_ENV = ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "TORCHELASTIC_RUN_ID")


class Check:
    """The checks of one run of this script: its temporary folder, its jobs, its lines."""

    def __init__(self, args, tmp: str):
        self.args, self.tmp = args, tmp
        self.lines: list[tuple[str, str, str]] = []  # (PASS | FAIL | SKIP, check, text)
        self.base_env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV}
        self.base_env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.deadline = time.monotonic() + args.budget
        self.runs = 0  # processes run so far (their output files are numbered)

    def say(self, status: str, name: str, text: str) -> None:
        self.lines.append((status, name, text))
        print(f"{status:4}  {name:20} {text}", flush=True)

    # -- processes -------------------------------------------------------------------------
    def run(self, cmd: list[str], env: dict, what: str) -> subprocess.CompletedProcess:
        """`cmd` within --timeout and what is left of --budget."""
        timeout = min(self.args.timeout, self.deadline - time.monotonic())
        if timeout <= 0:
            raise Failed(f"{what}: no time left of --budget {self.args.budget:g} s")
        self.runs += 1
        return run_process(cmd, env, timeout, self.tmp, f"{self.runs:02d}", what)

    def job(self, name: str, mode: str, record: bool, *extra: str, env: dict | None = None) -> str:
        """Launch gpu_check_job.py under torchrun into <tmp>/<name>; that folder (logs/ holds the log)."""
        out = os.path.join(self.tmp, name)
        os.makedirs(out)
        job_env = dict(self.base_env, **(env or {}))
        if record:
            job_env.update(COLLCHECK="1", COLLCHECK_DIR=os.path.join(out, "logs"), COLLCHECK_RUN_ID=name)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", "--master-addr", "127.0.0.1",
               "--master-port", str(free_port()), "--max-restarts", "0", JOB, mode, out,
               "--device", self.args.device, "--backend", self.args.backend, *extra]
        res = self.run(cmd, job_env, f"job {name}")
        if res.returncode != 0:
            raise Failed(f"job {name} exited {res.returncode}: {why_job_failed(res.stdout + res.stderr)}")
        return out

    def cli(self, *argv: str, codes=(0,)) -> subprocess.CompletedProcess:
        """`python -m collcheck ARGV`: never starts a build of the compiled path, caches under tmp."""
        env = dict(self.base_env, COLLCHECK_FASTPATH="0", XDG_CACHE_HOME=os.path.join(self.tmp, "cache"),
                   COLUMNS="400")
        res = self.run([sys.executable, "-m", "collcheck", *argv], env, f"collcheck {argv[0]}")
        if res.returncode not in codes:
            raise Failed(f"collcheck {' '.join(argv[:1])} exited {res.returncode}: {last_line(res.stderr)}")
        return res

    def recording_path(self) -> str:
        """Which recording path new jobs take, as `collcheck build-fastpath --status` says."""
        if os.environ.get("COLLCHECK_FASTPATH", "").strip().lower() in ("0", "false", "no", "off"):
            return "python (COLLCHECK_FASTPATH=0)"
        try:
            res = self.run([sys.executable, "-m", "collcheck", "build-fastpath", "--status"], self.base_env, "status")
        except Failed as exc:
            return f"unknown: {exc}"
        return "compiled" if "in use" in res.stdout and "not in use" not in res.stdout else "python"

    # -- 1. kinds ----------------------------------------------------------------------------
    def kinds_job(self) -> str:
        extra = [a for k in self.args.skip_kind for a in ("--skip-kind", k)]
        return self.job("kinds", "kinds", True, *extra, "--sleep-ms", str(self.args.sleep_ms),
                        env={"TORCH_FR_BUFFER_SIZE": "2000", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"})

    def check_kinds(self, folder: str) -> None:
        side = load_json(os.path.join(folder, "kinds.json"))
        log = the_log(os.path.join(folder, "logs"))
        header, groups, events = read_events(log)
        self.kinds_line(events, side)
        self.polled_line(header, groups, events)
        self.completion_line(events)
        self.cli_view_line(os.path.dirname(log), events)
        self.slow_line(header, events, side)

    def kinds_line(self, events: list[dict], side: dict) -> None:
        seen = {(e["op"], e["async"]) for e in events}
        missing = [f"{kind}{' (async_op=True)' if a else ''}" for kind, op in WIRE.items() for a in (False, True)
                   if (op, a) not in seen]
        extra = len(events) - len(side["issued"])
        figures = f"{len(WIRE)} kinds, blocking and async_op=True: {len(events)} events; send/recv not issued " \
                  f"(world size 1)"
        if missing:
            self.say("FAIL", "1 kinds recorded", f"not in the log: {', '.join(missing)}; {figures}")
        elif extra:
            self.say("FAIL", "1 kinds recorded", f"{extra:+d} events against the {len(side['issued'])} issued; {figures}")
        else:
            self.say("PASS", "1 kinds recorded", figures)

    def polled_line(self, header: dict, groups: dict, events: list[dict]) -> None:
        """Every group with collectives says its completions are polled (required on CUDA and with
        --expect-polled)."""
        used = sorted({e["gid"] for e in events})
        marked = [g for g in used if groups.get(g, {}).get("cp") == 1]
        poll_ms = header.get("poll_ms")
        expected = self.args.device == "cuda" or self.args.expect_polled
        text = f"poll_ms {poll_ms} in the header, {len(marked)}/{len(used)} groups marked cp: 1"
        if poll_ms is not None and len(marked) == len(used):
            self.say("PASS", "1 polled", text)
        elif expected:
            self.say("FAIL", "1 polled", text)
        else:
            setting = os.environ.get("COLLCHECK_COMPLETION", "unset")
            self.say("SKIP", "1 polled", f"not expected in CPU mode (COLLCHECK_COMPLETION={setting}, no "
                                         f"--expect-polled): {text}")

    def completion_line(self, events: list[dict]) -> None:
        """Every event completed, not before its issue. In CPU mode an event may be returned-only
        (the log format's D without `c`): torch 2.13's gloo Work of a reduce-scatter has no future
        and its is_completed() stays false, so neither a callback nor polling can see it complete.
        An event without even its return time is a failure everywhere."""
        tolerated = self.args.device == "cpu"
        early = [e for e in events if e["c"] is not None and e["c"] < e["ts"]]
        failed = [e for e in events if e["error"] is not None]
        none = [e for e in events if e["c"] is None and not (tolerated and e["r"] is not None)]
        returned_only = [e for e in events if e["c"] is None and e["r"] is not None]
        spans = [e["c"] - e["ts"] for e in events if e["c"] is not None]
        figures = f"{len(spans)}/{len(events)} with a completion time, completion - issue median " \
                  f"{statistics.median(spans) if spans else 0:g} µs, max {max(spans, default=0)} µs"
        if returned_only and tolerated:
            figures += f"; {len(returned_only)} returned only (gloo Work that never reports completion: " \
                       f"{', '.join(sorted({e['op'] for e in returned_only}))})"
        if early or none or failed:
            bad = [f"#{e['eid']} {e['op']}{'' if e['r'] is not None else ' (not even returned)'}"
                   for e in (early + none + failed)[:6]]
            self.say("FAIL", "1 completion", f"{len(none)} without completion, {len(early)} completed before "
                                             f"their issue, {len(failed)} failed ({', '.join(bad)}); {figures}")
        else:
            self.say("PASS", "1 completion", figures)

    def cli_view_line(self, run_dir: str, events: list[dict]) -> None:
        """`collcheck export` (the command line's view of the same log) shows the same events and times."""
        shown = export_events(self.cli, run_dir, self.tmp, "log")
        wrong = [e["eid"] for e, s in zip(events, shown) if s["op"] != e["op"] or abs(s["dur"] - slice_us(e)) > 1]
        if len(shown) != len(events) or wrong:
            self.say("FAIL", "1 cli view", f"collcheck export shows {len(shown)} events against {len(events)} in "
                                           f"the log; differing: {wrong[:6]}")
        else:
            self.say("PASS", "1 cli view", f"collcheck export shows the {len(events)} events, ops and durations")

    def slow_line(self, header: dict, events: list[dict], side: dict) -> None:
        """On CUDA: each all_reduce behind a GPU sleep (the log's all_reduces of its size, in order)
        completes no earlier than the sleep's end."""
        if not side["slow"]:
            self.say("SKIP", "1 slow collective", "needs a GPU (CPU mode): no GPU delay to wait for")
            return
        found = [e for e in events if e["op"] == "allreduce_" and e["numel"] == side["slow"][0]["numel"]]
        if len(found) != len(side["slow"]):
            raise Failed(f"{len(found)} all_reduces of {side['slow'][0]['numel']} elements in the log, "
                         f"{len(side['slow'])} issued behind a GPU sleep")
        parts, bad = [], 0
        for slow, e in zip(side["slow"], found):
            how = "async_op=True" if slow["async"] else "blocking"
            if e["c"] is None:
                bad += 1
                parts.append(f"{how}: no completion time")
                continue
            delay_us = slow["gpu_delay_ms"] * 1000
            issued_after_sleep_us = (header["mono_ns"] + e["ts"] * 1000 - slow["sleep_enqueued_mono_ns"]) / 1000
            bound = delay_us - max(0.0, issued_after_sleep_us)  # the sleep may have begun before the issue
            span = e["c"] - e["ts"]
            bad += span < bound * 0.99
            returned = f"{(e['r'] - e['ts']) / 1000:.2f} ms" if e["r"] is not None else "?"
            parts.append(f"{how}: completed {span / 1000:.1f} ms after its issue (returned after {returned}), GPU "
                         f"delay {delay_us / 1000:.1f} ms, at least {bound / 1000:.1f} ms expected")
        self.say("FAIL" if bad else "PASS", "1 slow collective", "; ".join(parts))

    # -- 2. cost -----------------------------------------------------------------------------
    def check_cost(self) -> None:
        extra = ("--calls", str(self.args.calls), "--reps", str(self.args.reps))
        plain, recorded = [], []
        for r in range(self.args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)  # alternate which goes first
            for record in order:
                folder = self.job(f"cost-{r}-{'rec' if record else 'plain'}", "loop", record, *extra)
                side = load_json(os.path.join(folder, "loop.json"))
                if record:
                    n = len(read_events(the_log(os.path.join(folder, "logs")))[2])
                    if n != side["calls"]:
                        raise Failed(f"the recorded launch's log holds {n} collectives, it issued {side['calls']}")
                (recorded if record else plain).append(statistics.median(side["us_per_call"]))
        diffs = [b - a for a, b in zip(plain, recorded)]
        self.say("PASS", "2 cost", f"{statistics.median(diffs):+.1f} µs per all_reduce recorded (median of "
                                   f"{len(diffs)} paired launches: {', '.join(f'{d:+.1f}' for d in diffs)}); plain "
                                   f"{statistics.median(plain):.1f} µs, recorded {statistics.median(recorded):.1f} µs; "
                                   f"{self.args.calls} x {self.args.reps} calls per launch")

    # -- 3. flight recorder ------------------------------------------------------------------
    def check_fr(self, folder: str) -> None:
        log = the_log(os.path.join(folder, "logs"))
        side = load_json(os.path.join(folder, "kinds.json"))
        dumps = [os.path.join(folder, f"fr-{api}") for api in side["dumps"]]
        log_diff = self.diff(os.path.dirname(log))
        chosen, tried = None, [f"{api}: {why}" for api, why in side["dumps_failed"].items()]
        for d in dumps:
            res = self.diff(d)
            if res[2] > 0:
                chosen = (d, res)
                break
            if res[0] == 2 and "no entries" not in res[3]:  # a dump collcheck cannot read is a failure
                raise Failed(f"collcheck diff could not read the dump from {os.path.basename(d)[3:]}: {res[3]}")
            tried.append(f"{os.path.basename(d)[3:]}: {res[3] or 'no collective'}")
        if chosen is None:
            self.say("SKIP", "3 flight recorder", f"no Flight Recorder entries from this torch's dumps "
                                                  f"({'; '.join(tried)}; TORCH_FR_BUFFER_SIZE=2000)")
            return
        dump_dir, fr_diff = chosen
        dump = os.path.join(dump_dir, os.listdir(dump_dir)[0])
        views = {}
        for what, path, run_dir in (("log", log, os.path.dirname(log)), ("dump", dump, dump_dir)):
            exported = sequences_of(export_events(self.cli, run_dir, self.tmp, what))
            shown = show_sequences(self.cli("show", path).stdout)
            if shown != exported:
                raise Failed(f"collcheck show and export differ on the {what}: {shown} against {exported}")
            views[what] = exported
        problems, figures = compare_sequences(views["log"], views["dump"], self.args.backend)
        if log_diff[:2] == fr_diff[:2]:
            verdicts = f"diff exit {fr_diff[0]}, verdict {fr_diff[1]} on both"
        else:
            verdicts = f"diff of the log: exit {log_diff[0]}, {log_diff[1]}; of the dump: exit {fr_diff[0]}, {fr_diff[1]}"
            problems.append(verdicts)
        figures = f"dump from {os.path.basename(dump_dir)[3:]}; {verdicts}; {figures}; show and export agree on each"
        self.say("FAIL" if problems else "PASS", "3 flight recorder", "; ".join(problems + [figures]))

    def diff(self, path: str) -> tuple[int, str, int, str]:
        """`collcheck diff PATH --format json`: (exit code, verdict, collectives, why unreadable)."""
        res = self.cli("diff", path, "--format", "json", codes=(0, 1, 2, 4))
        if res.returncode == 2:
            return 2, "unreadable", 0, last_line(res.stderr)
        report = json.loads(res.stdout)
        return res.returncode, report["verdict"], sum(r["collectives"] for r in report["ranks"].values()), ""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--backend", choices=("nccl", "gloo"), default=None, help="default: nccl on cuda, gloo on cpu")
    p.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated, of {', '.join(CHECKS)}")
    p.add_argument("--calls", type=int, default=1000, help="all_reduces per timed loop (cost)")
    p.add_argument("--reps", type=int, default=5, help="timed loops per launch (cost)")
    p.add_argument("--rounds", type=int, default=3, help="pairs of plain and recorded launches (cost)")
    p.add_argument("--sleep-ms", type=float, default=300.0, help="GPU delay before each slow all_reduce (CUDA)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per job or command")
    p.add_argument("--budget", type=float, default=290.0, help="seconds for the whole check")
    p.add_argument("--expect-polled", action="store_true", help="require polled completions in CPU mode too")
    p.add_argument("--skip-kind", action="append", default=[], choices=sorted(WIRE),
                   help="the job leaves this kind out (shows the kinds check failing)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args(argv)
    args.backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    args.checks = [c.strip() for c in args.checks.split(",") if c.strip()]
    if not args.checks or set(args.checks) - set(CHECKS):
        p.error(f"--checks: choose among {', '.join(CHECKS)}")
    if args.backend == "nccl" and args.device != "cuda":
        p.error("--backend nccl needs --device cuda")
    return args


def cuda_missing() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return f"no CUDA device visible to torch {torch.__version__}; the CPU mode: --device cpu --backend gloo"
    return None


def slice_us(e: dict) -> int:
    """The duration collcheck's trace gives an event: to its completion, else its return (at least 1 µs)."""
    end = e["c"] if e["c"] is not None else e["r"]
    return 1 if end is None else max(1, end - e["ts"])


def guarded(check: Check, name: str, step, *args) -> None:
    """One check: a Failed or any error of the check itself is its FAIL line, never a traceback."""
    try:
        step(*args)
    except Failed as exc:
        check.say("FAIL", name, str(exc))
    except Exception as exc:  # noqa: BLE001
        check.say("FAIL", name, f"internal error of the check: {type(exc).__name__}: {exc}")


def run_checks(check: Check) -> None:
    args = check.args
    print(f"gpu_check: {args.device}/{args.backend}, checks {', '.join(args.checks)}; recording path (collcheck "
          f"build-fastpath --status): {check.recording_path()}", flush=True)
    wanted = [name for key, name in (("kinds", "1 kinds"), ("fr", "3 flight recorder")) if key in args.checks]
    if wanted:
        try:
            folder = check.kinds_job()
        except Failed as exc:
            for name in wanted:
                check.say("FAIL", name, f"the kinds job: {exc}")
        else:
            if "kinds" in args.checks:
                guarded(check, "1 kinds", check.check_kinds, folder)
            if "fr" in args.checks:
                guarded(check, "3 flight recorder", check.check_fr, folder)
    if "cost" in args.checks:
        guarded(check, "2 cost", check.check_cost)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and (why := cuda_missing()):
        print(f"gpu_check: {why}", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="gpu-check-")
    check = Check(args, tmp)
    try:
        run_checks(check)
    except KeyboardInterrupt:
        print("gpu_check: interrupted", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"gpu_check: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    counts = {s: sum(1 for line in check.lines if line[0] == s) for s in ("PASS", "FAIL", "SKIP")}
    print(f"gpu_check: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
          f"({args.device}/{args.backend})")
    return 1 if counts["FAIL"] else 0


def entry() -> int:
    """main(), with any error of the script itself as one line (exit 2), never a traceback."""
    try:
        return main()
    except Exception as exc:  # noqa: BLE001
        print(f"gpu_check: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(entry())
