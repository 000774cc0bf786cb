"""Benchmark of `collcheck stats` on synthetic clean runs: the command's wall time and peak RSS.

    python benchmarks/bench_stats.py --ranks 4096 --events 10000
    python benchmarks/bench_stats.py --ranks 2 --events 1000000 --dir /tmp/bench-stats

Each size is written once with `collcheck.synth.write_clean_run` (timed apart; `--dir` keeps it
for the next run: a run already there is read again), then `collcheck stats DIR --format json`
runs `--repeat` times, each in a process of its own: its wall time, and its peak RSS (the largest
of the command and the worker processes it waited for: wait4's rusage). `--groups N` gives every
4th collective to one of N strided subgroups (ranks then come in N kinds). `--phases` also times,
in-process, reading the logs (`load_run`), the statistics and the JSON report apart.

Side by side with another source tree (a worktree of the previous release, say):

    python benchmarks/bench_stats.py --ranks 1024 --events 2000 --against ../prev --repeat 2

runs the command with this tree and with that one (PYTHONPATH), alternating, on the same logs,
prints both medians and their ratio (this / other), and whether the two trees printed the same
report (`same`: byte for byte, in the format of `--format`).
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

SCRIPT = os.path.abspath(__file__)
THIS_TREE = os.path.dirname(os.path.dirname(SCRIPT))  # the source tree this script belongs to


def _write(directory: str, ranks: int, events: int, groups: int) -> float:
    """The run written into `directory` (unless a run is there already); seconds it took (0: kept)."""
    if os.path.isdir(directory) and os.listdir(directory):
        return 0.0
    os.makedirs(directory, exist_ok=True)
    sys.path.insert(0, THIS_TREE)
    from collcheck.synth import write_clean_run

    subgroups = [list(range(k, ranks, groups)) for k in range(groups)] if groups > 1 else []
    t0 = time.perf_counter()
    write_clean_run(directory, ranks, events, groups=subgroups)
    return time.perf_counter() - t0


def _command(directory: str, tree: str, fmt: str) -> dict:
    """`collcheck stats DIR --format FMT` with `tree` first on PYTHONPATH, in a process of its own."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p))
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "collcheck", "stats", directory, "--format", fmt, "--top", "1000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir())
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    return {"s": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "cpu_s": usage.ru_utime + usage.ru_stime,
            "exit": os.waitstatus_to_exitcode(status), "out": out}


PHASES = """
import io, json, sys, time
from collcheck.model import load_run
from collcheck.report.stats import render_json
from collcheck.stats.summary import compute
t0 = time.perf_counter(); run = load_run(sys.argv[1], times=True)
t1 = time.perf_counter(); c1 = time.process_time(); st = compute(run)
t2 = time.perf_counter(); c2 = time.process_time(); render_json(st, io.StringIO())
t3 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "compute_s": t2 - t1, "compute_cpu_s": c2 - c1, "render_s": t3 - t2}))
"""


def _phases(directory: str, tree: str) -> dict:
    """In a process of its own, with `tree` first on PYTHONPATH: the seconds load_run(times=True),
    the statistics (stats.summary.compute; and its CPU seconds) and the JSON report took."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", PHASES, directory], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env=env, text=True, cwd=tempfile.gettempdir())
    return json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {}


def _size(args, ranks: int, trees: dict[str, str]) -> dict:
    """One size: written once, then each tree's command `--repeat` times (alternating)."""
    directory = os.path.join(args.dir, f"{ranks}x{args.events}") if args.dir else tempfile.mkdtemp(
        prefix=f"collcheck-bench-stats-{ranks}x{args.events}-")
    try:
        write_s = _write(directory, ranks, args.events, args.groups)
        size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
        labels = list(trees)
        order = [label for r in range(args.repeat) for label in (labels if r % 2 == 0 else labels[::-1])]
        rounds: dict[str, list[dict]] = {label: [] for label in labels}
        for label in order:
            rounds[label].append(_command(directory, trees[label], args.format))
        row = {"ranks": ranks, "events": args.events, "groups": args.groups, "bytes": size, "write_s": write_s}
        for label, rs in rounds.items():
            row[label] = {"tree": trees[label], "s": statistics.median(r["s"] for r in rs),
                          "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in rs),
                          "cpu_s": statistics.median(r["cpu_s"] for r in rs),
                          "exits": sorted({r["exit"] for r in rs}), "rounds": [r["s"] for r in rs]}
        if args.phases:
            for label in labels:
                row[label]["phases"] = _phases(directory, trees[label])
        outs = {r["out"] for rs in rounds.values() for r in rs}
        row["same"] = len(outs) == 1
        if "other" in rounds:
            row["ratio"] = {k: row["this"][k] / row["other"][k] if row["other"][k] else None
                            for k in ("s", "peak_rss_mb", "cpu_s")}
        return row
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)


def _print(row: dict, first: bool) -> None:
    trees = [label for label in ("this", "other") if label in row]
    if first:
        print(f"{'ranks':>6} {'ev/rank':>9} {'MB':>8} {'write s':>8} "
              + " ".join(f"{label + ' s':>9} {label + ' RSS MB':>13} {label + ' CPU s':>11}" for label in trees)
              + ("  ratio s   same" if "other" in row else "  exit"), flush=True)
    cells = " ".join(f"{row[label]['s']:>9.2f} {row[label]['peak_rss_mb']:>13,.0f} {row[label]['cpu_s']:>11.2f}"
                     for label in trees)
    tail = (f"  {row['ratio']['s']:>7.2f}x  {'yes' if row['same'] else 'NO'}" if "other" in row
            else f"  {','.join(map(str, row['this']['exits']))}")
    for label in trees:
        ph = row[label].get("phases")
        if ph is not None:
            tail += (f"\n        {label}, in-process: load {ph.get('load_s', 0):.2f} s, statistics "
                     f"{ph.get('compute_s', 0):.2f} s ({ph.get('compute_cpu_s', 0):.2f} s CPU), JSON "
                     f"{ph.get('render_s', 0):.2f} s")
    print(f"{row['ranks']:>6} {row['events']:>9,} {row['bytes'] / 2**20:>8,.1f} {row['write_s']:>8.2f} {cells}{tail}",
          flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_stats.py", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="64", help="comma-separated rank counts (default 64)")
    p.add_argument("--events", type=int, default=10000, help="collectives per rank (default 10000)")
    p.add_argument("--groups", type=int, default=0,
                   help="strided subgroups that get every 4th collective (default 0: world group only)")
    p.add_argument("--dir", help="write the logs here and keep them; a run already there is read again")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs of the command per tree (default 1)")
    p.add_argument("--format", default="json", choices=("json", "text"), help="the report's format (default json)")
    p.add_argument("--against", metavar="DIR",
                   help="another collcheck source tree: run the command with it and with this tree, alternating, "
                        "and say whether their reports are the same")
    p.add_argument("--phases", action="store_true",
                   help="also time, in-process, reading the logs, the statistics and the JSON report apart")
    p.add_argument("--json", action="store_true", help="print one JSON object per size instead of a table")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    trees = {"this": THIS_TREE}
    if args.against is not None:
        if not os.path.isfile(os.path.join(args.against, "collcheck", "__init__.py")):
            p.error(f"--against {args.against}: not a collcheck source tree (no collcheck/__init__.py in it)")
        trees["other"] = os.path.abspath(args.against)
    ok = True
    for n, ranks in enumerate(int(x) for x in args.ranks.split(",") if x.strip()):
        row = _size(args, ranks, trees)
        ok &= row["same"] and all(row[label]["exits"] == [0] for label in trees)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            _print(row, n == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
