"""How soon live mode names each scenario's first finding, and how soon it ends the job.

    python benchmarks/bench_live.py [--backend simnccl|gloo] [NAME ...]

Every scenario that is not valid (or the NAMEs) runs under torchrun with COLLCHECK=1,
COLLCHECK_LIVE_ACTION=abort and group timeouts of 60 s (SCENARIO_TIMEOUT_S). For each: the live
report's first finding next to the post-mortem `collcheck diff`'s and the scenario's expected one,
how many seconds after the divergent record (the last involved rank's) the report was written,
and how many seconds after it the job had ended. On gloo, scenarios whose collectives fail at once
(gloo's size checks, a peer gone) end by themselves before anything is published: "no report".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from collcheck.cli.demo import SCENARIOS_DIR, record_scenario, scenario_meta, scenario_names  # noqa: E402


def first(report: dict) -> tuple | None:
    f = report["findings"][0] if report.get("findings") else None
    return None if f is None else (f["kind"], f["group"], f["position"], tuple(f["ranks"]))


def expected(name: str, backend: str) -> tuple:
    with open(os.path.join(SCENARIOS_DIR, name, "expected.json")) as f:
        e = json.load(f)
    return first(e.get("simnccl", e) if backend == "simnccl" else e)


def measure(name: str, backend: str, work: str) -> dict:
    env = {"COLLCHECK_LIVE_ACTION": "abort", "SCENARIO_TIMEOUT_S": "60"}
    if backend == "simnccl":
        env["COLLCHECK_SIMNCCL"] = "1"
    started = time.time()
    rc, run_dir, _ = record_scenario(name, work, timeout=150, extra_env=env)
    ended = time.time()
    post = json.loads(subprocess.run([sys.executable, "-m", "collcheck", "diff", run_dir, "--format", "json"],
                                     capture_output=True, text=True, timeout=300).stdout)
    row = {"name": name, "rc": rc, "post": first(post), "expected": expected(name, backend), "job_s": ended - started}
    path = os.path.join(run_dir, "live-report.json")
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
        live = report["live"]
        row.update(live=first(report), report_s=live["reported_wall"] - live["divergence_wall"],
                   end_s=ended - live["divergence_wall"])
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_live.py", description=__doc__.split("\n")[0])
    p.add_argument("names", nargs="*", help="scenarios (default: every one that is not valid)")
    p.add_argument("--backend", choices=("simnccl", "gloo"), default="simnccl")
    args = p.parse_args(argv)
    names = args.names or [n for n in scenario_names() if not scenario_meta(n)["valid"]]
    print(f"collcheck bench_live: {len(names)} scenarios on {args.backend}, group timeouts 60 s, "
          "COLLCHECK_LIVE_ACTION=abort", flush=True)
    print(f"{'scenario':26} {'live report (kind, group, #, ranks)':44} {'same':>5} {'report s':>9} {'ended s':>8}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-live-") as work:
        for name in names:
            r = measure(name, args.backend, work)
            rows.append(r)
            if "live" in r:
                same = r["live"] == r["post"] == r["expected"]
                print(f"{name:26} {str(r['live']):44} {'yes' if same else 'NO':>5} {r['report_s']:9.1f} "
                      f"{r['end_s']:8.1f}", flush=True)
            else:
                print(f"{name:26} no report (the job was over in {r['job_s']:.1f} s)", flush=True)
    reported = [r for r in rows if "live" in r]
    if reported:
        rep, end = [r["report_s"] for r in reported], [r["end_s"] for r in reported]
        print(f"\n{len(reported)}/{len(rows)} reported; same first finding as the post-mortem and expected: "
              f"{sum(r['live'] == r['post'] == r['expected'] for r in reported)}; report after the divergence: median "
              f"{statistics.median(rep):.1f} s, max {max(rep):.1f} s; job ended after: median "
              f"{statistics.median(end):.1f} s, max {max(end):.1f} s (the group timeout: 60 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
