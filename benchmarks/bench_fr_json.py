"""Benchmark of `collcheck diff` on a big JSON Flight Recorder dump under a memory limit.

    python benchmarks/bench_fr_json.py [--mib 160] [--limit-gib 2] [--tree DIR]

Writes one rank's JSON dump (as `_dump_nccl_trace_json()` lays it out: version, pg_config,
pg_status, entries) of --mib MiB whose entries are empty objects (`{},` 56 million times at
160 MiB: parsed, 4 GB of dicts), not timed, then runs `collcheck diff` on it in a process of its
own with its address space limited to --limit-gib GiB (RLIMIT_AS, set before it starts): its
exit code, the line it wrote, its wall time and its peak RSS (wait4: the command or a worker).
collcheck should refuse it (exit 2, one line) or read it, well below the limit (bounded: its peak
under 90 % of it). --limit-gib 0 runs it without a limit (the peak RSS alone); --tree DIR runs
another collcheck source tree (the release before, say).
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

THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_dump(path: str, mib: int) -> int:
    """A dump of `mib` MiB of empty entries; its size in bytes."""
    head = json.dumps({"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0]"}},
                       "pg_status": {}, "comm_lib_version": "2.21.5"})[:-1] + ', "entries": ['
    count = max(1, ((mib << 20) - len(head) - 3) // 3)
    block = "{}," * 65536
    with open(path, "w") as f:
        f.write(head)
        for _ in range((count - 1) // 65536):
            f.write(block)
        f.write("{}," * ((count - 1) % 65536) + "{}]}")
    return os.path.getsize(path)


def run_limited(argv: list[str], limit: int, env: dict) -> dict:
    """`argv` with RLIMIT_AS at `limit` bytes: exit code, stderr, wall s, peak RSS MB."""

    def limited():
        if limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, preexec_fn=limited)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err.seek(0)
        return {"exit": os.waitstatus_to_exitcode(status), "stderr": err.read().decode(errors="replace"),
                "s": wall, "peak_rss_mb": usage.ru_maxrss / 1024}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_fr_json.py", description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, default=160, help="size of the dump (default 160 MiB)")
    p.add_argument("--limit-gib", type=float, default=2.0,
                   help="address-space limit of the command (default 2 GiB; 0: none, the peak RSS only)")
    p.add_argument("--tree", default=THIS_TREE, help="the collcheck source tree to run (default: this one)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    root = tempfile.mkdtemp(prefix="collcheck-bench-fr-json-")
    try:
        dumps = os.path.join(root, "dumps")
        os.makedirs(dumps)
        size = write_dump(os.path.join(dumps, "comm_lib_trace_rank_0"), args.mib)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (args.tree, os.environ.get("PYTHONPATH")) if p),
                   COLLCHECK_FASTPATH="0", XDG_CACHE_HOME=os.path.join(root, "cache"))
        limit = int(args.limit_gib * (1 << 30))
        res = run_limited([sys.executable, "-m", "collcheck", "diff", dumps], limit, env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lines = res["stderr"].strip().splitlines()
    one_line = res["exit"] in (0, 1, 2) and len(lines) <= 1 and "Traceback" not in res["stderr"]
    # (well below the limit: bounded by collcheck, not stopped by the limit; without one: not judged)
    res.update(bytes=size, limit_mb=limit / (1 << 20), lines=len(lines), tree=args.tree,
               bounded=one_line and res["peak_rss_mb"] < 0.9 * limit / (1 << 20) if limit else None)
    if args.json:
        print(json.dumps(res))
        return 0
    under = f"under a {args.limit_gib:g} GiB address-space limit" if limit else "without a limit"
    print(f"collcheck bench_fr_json: a JSON Flight Recorder dump of {size / (1 << 20):.0f} MiB of empty entries, "
          f"`collcheck diff` {under} ({args.tree})")
    verdict = {True: "bounded", False: "NOT BOUNDED", None: "no limit"}[res["bounded"]]
    print(f"  exit {res['exit']} in {res['s']:.2f} s, peak RSS {res['peak_rss_mb']:,.0f} MB: {verdict}")
    for line in lines[-3:]:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
