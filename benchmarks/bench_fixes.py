"""Does the fix `collcheck stats` hints at pay off? Each scenario against its fixed variant.

    python benchmarks/bench_fixes.py [--pairs 3]

`scenarios/per_param_allreduce` (seed 000: an all_reduce per gradient; SCENARIO_STEPS=200),
`scenarios/many_small_broadcasts` (seed 002: a broadcast per tensor of the module state;
SCENARIO_BUFFERS=2000), both on 2 ranks, and `scenarios/pairwise_groups` (seed 001: a group per
pair of ranks, 1,024 small all-reduces in each; 4 ranks) run under COLLCHECK=1 torchrun,
alternating with their `fixed.py` (one flattened all_reduce per step; one coalesced broadcast;
8 iterations' tensors per all-reduce), `--pairs` times. For
each: the first hint `collcheck stats` gives on main.py, the time inside collectives (the sum over
call sites of the time of the rank that spent the most) of both variants (medians over the
pairs), the ratio, and the hint's estimate of the fixed time next to the measured one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {"per_param_allreduce": (2, {"SCENARIO_STEPS": "200"}), "many_small_broadcasts": (2, {"SCENARIO_BUFFERS": "2000"}),
         "pairwise_groups": (4, {"SCENARIO_ITERS": "1024"})}  # name -> (ranks, environment)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(script: str, env_extra: dict, work: str, tag: str, nproc: int = 2) -> tuple[dict, list]:
    """(collcheck stats --format json of the run, the ranks' printed results)."""
    run_id = f"{tag}-{_free_port()}"
    env = dict(os.environ, COLLCHECK="1", COLLCHECK_DIR=work, COLLCHECK_RUN_ID=run_id, OMP_NUM_THREADS="1",
               PYTHONUNBUFFERED="1", **env_extra)
    env.pop("TORCHELASTIC_RUN_ID", None)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
                           "127.0.0.1", "--master-port", str(_free_port()), script], env=env, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} failed: {proc.stderr[-2000:]}")
    stats = subprocess.run([sys.executable, "-m", "collcheck", "stats", os.path.join(work, run_id), "--format", "json"],
                           capture_output=True, text=True, timeout=600)
    # (the ranks' lines may be glued together in torchrun's output)
    results = sorted(re.findall(r"rank (\d+): [^\n]*?(checksum -?[\d.]+|ok=(?:True|False))", proc.stdout))
    return json.loads(stats.stdout), results


def comm_s(stats: dict) -> float:
    return sum(s["total_s"] for s in stats["sites"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_fixes.py", description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=3, help="main.py / fixed.py launches, alternating")
    args = p.parse_args(argv)
    print(f"collcheck bench_fixes: {args.pairs} alternating pairs per scenario, gloo", flush=True)
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-fixes-") as work:
        for name, (nproc, extra) in CASES.items():
            folder = os.path.join(ROOT, "scenarios", name)
            times = {"main": [], "fixed": []}
            hint, same = None, True
            for i in range(args.pairs):
                for variant in ("main", "fixed") if i % 2 == 0 else ("fixed", "main"):
                    stats, results = record(os.path.join(folder, f"{variant}.py"), extra, work, f"{name}-{variant}", nproc)
                    times[variant].append(comm_s(stats))
                    if variant == "main" and hint is None:
                        hint, main_results = (stats["hints"] or [None])[0], results
                    if variant == "fixed":
                        fixed_results = results
            same = main_results == fixed_results
            m, f = statistics.median(times["main"]), statistics.median(times["fixed"])
            print(f"\n{name} ({nproc} ranks, {' '.join(f'{k}={v}' for k, v in extra.items())}):")
            if hint:
                estimate = hint["evidence"].get("fused_s", hint["evidence"].get("batched_s", 0))
                print(f"  first hint on main.py: {hint['kind']} at {os.path.basename(hint['site']['file'])}:"
                      f"{hint['site']['line']}, estimated fixed time {estimate:.4f} s")
            print(f"  time inside collectives (per call site its busiest rank, summed), median of {args.pairs}: main.py {m:.4f} s, fixed.py {f:.4f} s: "
                  f"{m / f:.1f}x faster fixed (runs: main {', '.join(f'{x:.4f}' for x in times['main'])}; "
                  f"fixed {', '.join(f'{x:.4f}' for x in times['fixed'])}); same results: {'yes' if same else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
