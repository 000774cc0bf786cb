"""`python benchmarks/bench_cpu.py`: CPU that recording adds per collective, all threads counted.

A world-size-1 gloo all_reduce loop of a small tensor, run in a fresh process per launch:
plain, recorded with the compiled path (when built), recorded with the Python path, launches
alternating. Each launch reports the user + system CPU time of its whole process (every thread:
gloo's, the completion callbacks', the watchdog's) over the timed loop, from getrusage, divided by
the number of calls, and the wall time per call. Reports the median over launches of each variant
and what recording adds to the plain launches' median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)
VARIANTS = {"plain": None, "compiled": "auto", "python": "0"}  # -> COLLCHECK_FASTPATH (None: not recorded)


def _worker(calls: int, log_dir: str | None) -> None:
    import datetime

    import torch

    torch.set_num_threads(1)
    if log_dir:
        import collcheck

        collcheck.enable(log_dir, run_id="cpu", hang_seconds=0)
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    t = torch.ones(16)
    for _ in range(500):  # warm-up: caches, interned ids, the compiled path's templates
        dist.all_reduce(t)
    r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(calls):
        dist.all_reduce(t)
    w1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    path = None
    if log_dir:
        from collcheck.capture import session

        path = "compiled" if session.recorder().compiled else "python"
    print(json.dumps({"cpu_us": cpu / calls * 1e6, "wall_us": (w1 - w0) / calls * 1e6, "path": path}), flush=True)
    dist.destroy_process_group()


def _launch(variant: str, calls: int, work: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COLLCHECK") and k != "TORCH_DISTRIBUTED_DEBUG"}
    env.update(OMP_NUM_THREADS="1")
    args = [sys.executable, SCRIPT, "--worker", "--calls", str(calls)]
    setting = VARIANTS[variant]
    if setting is not None:
        env["COLLCHECK_FASTPATH"] = setting
        args += ["--log-dir", tempfile.mkdtemp(dir=work)]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{variant} launch failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_cpu.py", description=__doc__.split("\n")[0])
    p.add_argument("--launches", type=int, default=5, help="launches per variant, alternating (default 5)")
    p.add_argument("--calls", type=int, default=20000, help="all_reduce calls per launch (default 20000)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args.calls, args.log_dir)
        return 0
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-cpu-") as work:
        for _ in range(args.launches):
            for variant in VARIANTS:
                runs[variant].append(_launch(variant, args.calls, work))
    print(f"collcheck bench_cpu: {args.launches} launches per variant alternating, {args.calls} all_reduce calls "
          f"of 16 floats each (world size 1, gloo), {os.cpu_count()} CPUs")
    print(f"   {'variant':<24}{'CPU us/call':>12}{'added':>9}{'wall us/call':>14}{'added':>9}  path")
    base = {k: statistics.median(r[k] for r in runs["plain"]) for k in ("cpu_us", "wall_us")}
    result = {"launches": args.launches, "calls": args.calls}
    for variant, rs in runs.items():
        cpu, wall = statistics.median(r["cpu_us"] for r in rs), statistics.median(r["wall_us"] for r in rs)
        paths = sorted({r["path"] for r in rs if r["path"]})
        print(f"   {variant:<24}{cpu:>12.1f}{cpu - base['cpu_us']:>+9.1f}{wall:>14.1f}{wall - base['wall_us']:>+9.1f}"
              f"  {','.join(paths) or '-'}")
        result[variant] = {"cpu_us": cpu, "wall_us": wall, "cpu_added_us": cpu - base["cpu_us"],
                           "wall_added_us": wall - base["wall_us"], "paths": paths,
                           "cpu_us_each": [round(r["cpu_us"], 2) for r in rs]}
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
