"""Benchmark of reading one log into columns (`collcheck.logfile.scan.scan_file`, what every command
does first): the compiled loop (logfile/compiled.py) against the Python loop alone, alternating.

    python benchmarks/bench_read.py --events 1000000 --dir /tmp/br
    python benchmarks/bench_read.py LOG [LOG ...]

Writes a synthetic clean log of `--events` collectives (`collcheck.synth.write_clean_run`, kept
in `--dir`) unless logs are named, then reads each `--repeat` times with each reader, in this
process, alternating (with the statistics' times, as `collcheck stats` reads: `--times`), and
prints per reader the median wall and CPU seconds, the collectives per second, the share of the
collectives the compiled loop took, and whether the two scans are equal (every column and table).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from collcheck.logfile import compiled, fastscan  # noqa: E402
from collcheck.logfile.reader import read_bytes  # noqa: E402
from collcheck.logfile.scan import scan_bytes  # noqa: E402
from collcheck.synth import write_clean_run  # noqa: E402


def _log(directory: str, events: int) -> str:
    path = os.path.join(directory, f"2x{events}", "rank-00000.0.msgpack")
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_clean_run(os.path.dirname(path), 2, events)
    return path


def _same(a, b) -> bool:
    """Whether two scans hold the same columns and tables (their Times by value)."""
    def plain(scan):
        out = {k: v for k, v in vars(scan).items() if k not in ("tables", "times")}
        out["times"] = vars(scan.times) if scan.times is not None else None
        out["tables"] = (scan.tables.strings, scan.tables.sites, scan.tables.tspecs) if scan.tables else None
        return out
    return plain(a) == plain(b)


def _read(data: bytes, path: str, lib, times: bool) -> tuple[float, float, object]:
    compiled._LIB[:] = [lib]
    t0, c0 = time.perf_counter(), time.process_time()
    scan = scan_bytes(data, path, times=times)
    return time.perf_counter() - t0, time.process_time() - c0, scan


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("logs", nargs="*")
    p.add_argument("--events", type=int, default=1_000_000)
    p.add_argument("--dir", default="/tmp/collcheck-bench-read")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--times", action=argparse.BooleanOptionalAction, default=True)
    args = p.parse_args()
    lib = compiled.library()
    if lib is None:
        print("no compiled loop here (no C compiler, COLLCHECK_READER=python or COLLCHECK_CACHE empty)")
        return 1
    taken = [0]
    add = fastscan._add
    fastscan._add = lambda scanner, batch, out: (taken.__setitem__(0, taken[0] + out.n), add(scanner, batch, out))
    for path in args.logs or [_log(args.dir, args.events)]:
        data = read_bytes(path)
        runs: dict[str, list] = {"compiled": [], "python": []}
        scans = {}
        for _ in range(args.repeat):
            for label, which in (("compiled", lib), ("python", None)):
                taken[0] = 0
                wall, cpu, scans[label] = _read(data, path, which, args.times)
                runs[label].append((wall, cpu, taken[0]))
        n = len(scans["python"].sig)
        print(f"{path}: {len(data) / 1e6:.1f} MB, {n:,} collectives, scans equal: "
              f"{_same(scans['compiled'], scans['python'])}")
        for label, rows in runs.items():
            wall = statistics.median(r[0] for r in rows)
            cpu = statistics.median(r[1] for r in rows)
            share = f", compiled loop took {rows[0][2] / max(n, 1):.1%}" if label == "compiled" else ""
            print(f"  {label:8s} wall {wall:7.3f} s  CPU {cpu:7.3f} s  {n / wall / 1e6:6.2f} M collectives/s{share}")
        ratio = statistics.median(r[0] for r in runs["python"]) / statistics.median(r[0] for r in runs["compiled"])
        print(f"  python / compiled: {ratio:.1f}x")
    compiled._LIB[:] = []
    return 0


if __name__ == "__main__":
    sys.exit(main())
