"""Benchmark of `collcheck diff`, `collcheck stats` and the TUI's first screen on a run of many process groups.

    python benchmarks/bench_many_groups.py [--groups 100000] [--scaling 5000,20000] [--calls 1]

A 2-rank run (`collcheck.synth.write_groups_run`, not timed) creates N groups one after the
other, each used by --calls all-reduces right after its creation, for N in --scaling and
--groups. Each command runs as users run it, in a process of its own (this tree first on
PYTHONPATH, COLLCHECK_FASTPATH=0: no background build meanwhile): its wall time from start to
exit, its exit code and its peak RSS (the command's or a worker's, from wait4). The TUI is
`CollcheckApp` driven headless (`App.run_test`, 200x50) in a process of its own, timed from the
process's start to the first screen shown after the run is loaded and analysed (the overview).
Each figure is said against --limit-s (default 10 s). What each group above the previous N costs
(µs per added group: the interpreter's start and imports cancel out) stays the same from one N to
the next when the work is linear in the groups; a spot that scans every group per group makes
it grow with N.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TUI = r"""
import asyncio, sys, time
from collcheck.tui.app import CollcheckApp

async def main():
    app = CollcheckApp(sys.argv[1])
    async with app.run_test(size=(200, 50)) as pilot:
        while (app.report is None or app.preview) and app.error is None:
            await asyncio.sleep(0.1)
        await pilot.pause()  # (the screen the load put up is painted)
        print(f"{time.time()} {app.error or ''}", flush=True)

asyncio.run(main())
"""


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (THIS_TREE, os.environ.get("PYTHONPATH")) if p),
                COLLCHECK_FASTPATH="0")


def timed(argv: list[str]) -> dict:
    """A command in a process of its own: wall seconds, exit code, peak RSS (MB), its stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0, start = time.perf_counter(), time.time()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=_env())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {"s": wall, "exit": proc.returncode, "peak_rss_mb": usage.ru_maxrss / 1024, "start": start,
                "out": out.read().decode(errors="replace"), "err": err.read().decode(errors="replace")[-2000:]}


def measure(directory: str, tui: bool) -> dict:
    """diff, stats and the TUI's first screen on the run in `directory`."""
    res = {}
    diff = timed([sys.executable, "-m", "collcheck", "diff", directory])
    verdict = re.search(r"verdict: (\w+)", diff["out"])
    res["diff"] = {"s": diff["s"], "exit": diff["exit"], "peak_rss_mb": diff["peak_rss_mb"],
                   "verdict": verdict[1].lower() if verdict else diff["err"], "lines": len(diff["out"].splitlines())}
    stats = timed([sys.executable, "-m", "collcheck", "stats", directory])
    res["stats"] = {"s": stats["s"], "exit": stats["exit"], "peak_rss_mb": stats["peak_rss_mb"],
                    "lines": len(stats["out"].splitlines()), "longest_line": max(map(len, stats["out"].splitlines()), default=0)}
    if tui:
        run = timed([sys.executable, "-c", _TUI, directory])
        shown, _, error = run["out"].strip().partition(" ")
        res["tui"] = {"s": float(shown) - run["start"] if shown else None, "exit": run["exit"],
                      "peak_rss_mb": run["peak_rss_mb"], "error": error or (run["err"] if run["exit"] else "")}
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_many_groups.py", description=__doc__.split("\n")[0])
    p.add_argument("--groups", type=int, default=100_000, help="groups of the main run (default 100,000)")
    p.add_argument("--scaling", default="5000,20000", help="smaller runs, to show the growth (comma-separated)")
    p.add_argument("--calls", type=int, default=1, help="all-reduces on each group (default 1)")
    p.add_argument("--limit-s", type=float, default=10.0, help="the time each command should stay within")
    p.add_argument("--no-tui", action="store_true", help="leave the TUI out")
    p.add_argument("--dir", help="write the runs here and keep them")
    p.add_argument("--json", action="store_true", help="one JSON line per run")
    args = p.parse_args(argv)
    sys.path.insert(0, THIS_TREE)
    from collcheck.synth import write_groups_run

    sizes = sorted({int(n) for n in args.scaling.split(",") if n.strip()} | {args.groups})
    root = args.dir or tempfile.mkdtemp(prefix="collcheck-bench-many-groups-")
    commands = ("diff", "stats") if args.no_tui else ("diff", "stats", "tui")
    if not args.json:
        print(f"collcheck bench_many_groups: 2 ranks, N groups each used by {args.calls} all-reduce(s), "
              f"{os.cpu_count()} CPUs; each command in a process of its own, limit {args.limit_s:g} s")
        print(f"{'groups':>8} {'log MB':>7} " + " ".join(f"{c + ' s':>9} {'MB':>5}" for c in commands)
              + "  µs per added group (" + ", ".join(commands) + ")")
    rows = []
    try:
        for n in sizes:
            directory = os.path.join(root, f"groups-{n}")
            if not os.path.isdir(directory):
                os.makedirs(directory)
                write_groups_run(directory, n, calls=args.calls)
            size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
            row = {"groups": n, "calls": args.calls, "bytes": size, **measure(directory, not args.no_tui)}
            for c in commands:
                s = row[c]["s"]
                row[c]["within"] = s is not None and row[c]["exit"] in (0, 1) and s <= args.limit_s
                prev = rows[-1][c]["s"] if rows else None
                # what each group above the previous run's costs (the interpreter's start cancels out)
                row[c]["us_per_added_group"] = (None if s is None or prev is None
                                                else (s - prev) / (n - rows[-1]["groups"]) * 1e6)
            rows.append(row)
            if args.json:
                print(json.dumps(row), flush=True)
                continue
            cells = " ".join(f"{_secs(row[c]):>9} {row[c]['peak_rss_mb'] or 0:>5.0f}" for c in commands)
            per = ", ".join(_us(row[c]["us_per_added_group"]) for c in commands)
            print(f"{n:>8,} {size / 1e6:>7.1f} {cells}  {per}", flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    if not args.json and len(rows) > 2:
        first, last = rows[1], rows[-1]
        growth = ", ".join(f"{c} {last[c]['us_per_added_group'] / first[c]['us_per_added_group']:.2f}x"
                           for c in commands if last[c]["us_per_added_group"] and first[c]["us_per_added_group"])
        print(f"µs per added group, {rows[-2]['groups']:,} -> {last['groups']:,} against {rows[0]['groups']:,} -> "
              f"{first['groups']:,}: {growth} (1x: linear; quadratic work grows with the groups)")
    if not args.json and rows:
        last = rows[-1]
        print(f"within {args.limit_s:g} s at {last['groups']:,} groups: "
              + ", ".join(f"{c} {'yes' if last[c]['within'] else 'NO'}" for c in commands))
    return 0


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _secs(cell: dict) -> str:
    if cell["s"] is None or cell["exit"] not in (0, 1):
        return f"exit {cell['exit']}"
    return f"{cell['s']:.2f}{'' if cell['within'] else '!'}"


if __name__ == "__main__":
    sys.exit(main())
