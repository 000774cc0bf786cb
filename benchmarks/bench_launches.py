"""Benchmark of a folder of many launches: telling them apart (headers only) and `collcheck diff`.

    python benchmarks/bench_launches.py --launches 1000 --world 2 --events 20
    python benchmarks/bench_launches.py --launches 50000 --world 2 --split-only --reused

Writes `--launches` clean launches of `--world` ranks (`collcheck.synth.write_clean_run`, `--events`
collectives per rank) into one folder: each under a run id of its own (`<folder>/<run id>/`, as
torchrun launches leave them), or with `--reused` all under one run id, ten seconds apart, each
file's last write five seconds after its start (as a test runner's spawned ranks leave them). Then
times, in this process, `find_launches` (the headers of every log) and, unless `--split-only`,
`collcheck diff FOLDER` (its output to /dev/null), and prints the peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

S = 1_000_000_000
T0 = 1_700_000_000 * S
PER_FOLDER = 100  # reused-id launches per subfolder (log names of one rank run out at about 100 per folder)


def write(folder: str, launches: int, world: int, events: int, reused: bool) -> int:
    from collcheck.synth import write_clean_run

    count = 0
    for k in range(launches):
        start = T0 + 10 * S * k
        where = os.path.join(folder, str(k // PER_FOLDER)) if reused else os.path.join(folder, f"launch-{k:06d}")
        paths = write_clean_run(where, world, events, run_id="pytest" if reused else f"launch-{k:06d}", wall_ns=start)
        for path in paths:
            os.utime(path, ns=(start + 5 * S, start + 5 * S))
        count += len(paths)
    return count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=1000)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--events", type=int, default=20)
    ap.add_argument("--reused", action="store_true", help="every launch under one run id")
    ap.add_argument("--split-only", action="store_true", help="time find_launches alone")
    ap.add_argument("--keep", help="write into this folder and keep it")
    args = ap.parse_args()
    folder = args.keep or tempfile.mkdtemp(prefix="collcheck-bench-launches-")
    try:
        t0 = time.perf_counter()
        logs = write(folder, args.launches, args.world, args.events, args.reused)
        print(f"wrote {logs:,} logs of {args.launches:,} launches in {time.perf_counter() - t0:.1f} s")
        from collcheck.inputs.discover import discover
        from collcheck.inputs.launches import find_launches

        t0 = time.perf_counter()
        found = find_launches(discover(folder))
        print(f"find_launches: {len(found):,} launches in {time.perf_counter() - t0:.2f} s")
        assert len(found) == args.launches, len(found)
        if not args.split_only:
            from collcheck.cli import main as cli

            t0 = time.perf_counter()
            with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
                code = cli(["diff", folder])
            print(f"collcheck diff: exit {code} in {time.perf_counter() - t0:.1f} s")
        print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
