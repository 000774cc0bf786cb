"""Benchmark of `collcheck diff` on synthetic clean runs: load time, analysis time, peak memory.

    python benchmarks/bench_diff.py --ranks 64,1024 --events 10000

Each size runs in a child process (so peak RSS is per size): it writes a clean run with
`collcheck.synth.write_clean_run` into a temporary directory (timed separately), then
times `load_run` and `analyse` in that same child. `--profile N` prints the top N
functions of a cProfile of load_run + analyse.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)  # child processes run this same script


def _child(ranks: int, events: int, groups: int, directory: str | None, profile: int) -> dict:
    from collcheck.synth import write_clean_run

    tmp = directory or tempfile.mkdtemp(prefix=f"collcheck-bench-{ranks}x{events}-")
    try:
        subgroups = [list(range(k, ranks, groups)) for k in range(groups)] if groups > 1 else []
        t0 = time.perf_counter()
        write_clean_run(tmp, ranks, events, groups=subgroups)
        t_write = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        from collcheck.analysis.diff import analyse
        from collcheck.model import load_run

        prof = None
        if profile:
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        t0 = time.perf_counter()
        run = load_run(tmp)
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = analyse(run)
        t_analyse = time.perf_counter() - t0
        if prof is not None:
            import io
            import pstats

            prof.disable()
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(profile)
            print(out.getvalue(), file=sys.stderr)
        n = sum(len(log) for log in run.ranks.values())
        return {
            "ranks": ranks, "events": events, "total_events": n, "bytes": size, "write_s": t_write,
            "load_s": t_load, "analyse_s": t_analyse, "verdict": report.verdict, "findings": len(report.findings),
            "events_per_s": n / (t_load + t_analyse) if t_load + t_analyse else 0.0,
            "rss_before_load_mb": rss_before / 1024, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            # load_run scans files in worker processes: their peak counts too (sum is an upper bound)
            "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
    finally:
        if directory is None:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_diff.py", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="64", help="comma-separated rank counts (default 64)")
    p.add_argument("--events", type=int, default=10000, help="collectives per rank (default 10000)")
    p.add_argument("--groups", type=int, default=0,
                   help="strided subgroups that get every 4th collective (default 0: world group only)")
    p.add_argument("--dir", help="write the logs here and keep them (default: a temporary directory, removed)")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N functions (cProfile)")
    p.add_argument("--json", action="store_true", help="print one JSON object per size instead of a table")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.ranks.split(",") if x.strip()]
    if args.child:
        print(json.dumps(_child(sizes[0], args.events, args.groups, args.dir, args.profile)))
        return 0
    rows = []
    for ranks in sizes:
        cmd = [sys.executable, SCRIPT, "--child", "--ranks", str(ranks), "--events",
               str(args.events), "--groups", str(args.groups), "--profile", str(args.profile)]
        if args.dir:
            cmd += ["--dir", os.path.join(args.dir, f"{ranks}x{args.events}")]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(f"{ranks} ranks: child failed with exit code {proc.returncode} "
                  f"({'killed: out of memory?' if proc.returncode < 0 else 'see stderr'})", file=sys.stderr)
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            if len(rows) == 1:
                print(f"{'ranks':>6} {'ev/rank':>8} {'events':>11} {'MB':>8} {'write s':>8} {'load s':>8} "
                      f"{'analyse s':>9} {'events/s':>11} {'peak RSS MB':>11} {'worker MB':>9}  verdict", flush=True)
            print(f"{row['ranks']:>6} {row['events']:>8} {row['total_events']:>11} {row['bytes'] / 2**20:>8.1f} "
                  f"{row['write_s']:>8.2f} {row['load_s']:>8.2f} {row['analyse_s']:>9.2f} "
                  f"{row['events_per_s']:>11,.0f} {row['peak_rss_mb']:>11,.0f} {row['worker_peak_rss_mb']:>9,.0f}  {row['verdict']}", flush=True)
    return 0 if len(rows) == len(sizes) else 1


if __name__ == "__main__":
    sys.exit(main())
