"""What does a collective cost against the number of process groups (seed 001)?

    python benchmarks/bench_groups.py [--max-pairs 4] [--repeats 3] [--iters 1024] [--cpus N]

`scenarios/pairwise_groups` on 2N ranks (N = 1 .. --max-pairs), gloo over loopback: a group per
pair of ranks, --iters all-reduces of a 10x10 tensor in each pair, as in seed 001. Two variants,
launched alternately --repeats times, not recorded: every pair communicating at once (the seed's
program), and only the first pair communicating while the N groups exist all the same
(SCENARIO_ACTIVE_PAIRS=1). The time per all-reduce is what each pair's first rank prints (median
over pairs and launches). Then one recorded launch of the seed's program per N and what
`collcheck stats` says about it: the all-reduce's median time against the number of groups
communicating at once, and its hints. --cpus N runs every launch on the first N CPUs only
(ranks outnumbering CPUs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fixes import ROOT, _free_port  # noqa: E402

SCRIPT = os.path.join(ROOT, "scenarios", "pairwise_groups", "main.py")


CPUS: set | None = None  # --cpus: the CPUs every launch may run on


def launch(pairs: int, env_extra: dict) -> list[float]:
    """µs per all-reduce printed by each communicating pair."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", SCENARIO_TIMEOUT_S="120", **env_extra)
    env.pop("TORCHELASTIC_RUN_ID", None)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(2 * pairs),
                           "--master-addr", "127.0.0.1", "--master-port", str(_free_port()), SCRIPT],
                          env=env, capture_output=True, text=True, timeout=600, check=False,
                          preexec_fn=(lambda: os.sched_setaffinity(0, CPUS)) if CPUS else None)
    if proc.returncode != 0:
        raise RuntimeError(f"{pairs} pairs failed: {proc.stderr[-2000:]}")
    return [float(x) for x in re.findall(r"([\d.]+) µs each", proc.stdout)]


def stats_of(pairs: int, iters: int, work: str) -> dict:
    run_id = f"groups-{pairs}-{_free_port()}"
    launch(pairs, {"COLLCHECK": "1", "COLLCHECK_DIR": work, "COLLCHECK_RUN_ID": run_id, "SCENARIO_ITERS": str(iters)})
    out = subprocess.run([sys.executable, "-m", "collcheck", "stats", os.path.join(work, run_id), "--format", "json"],
                         capture_output=True, text=True, timeout=600, check=False)
    return json.loads(out.stdout)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_groups.py", description=__doc__.split("\n")[0])
    p.add_argument("--max-pairs", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iters", type=int, default=1024)
    p.add_argument("--cpus", type=int, default=0, help="run every launch on the first N CPUs only")
    args = p.parse_args(argv)
    global CPUS
    CPUS = set(sorted(os.sched_getaffinity(0))[:args.cpus]) if args.cpus else None
    print(f"collcheck bench_groups: scenarios/pairwise_groups, {args.iters} all-reduces of 400 bytes per pair, "
          f"gloo, {len(CPUS) if CPUS else os.cpu_count()} CPUs, {args.repeats} alternating launches per variant",
          flush=True)
    print(f"{'pairs':>5} {'groups':>6} {'all pairs at once (µs)':>23} {'one pair of N (µs)':>19}  "
          "collcheck stats on a recorded launch of the first variant")
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-groups-") as work:
        for pairs in range(1, args.max_pairs + 1):
            every, one = [], []
            for i in range(args.repeats):
                order = ("every", "one") if i % 2 == 0 else ("one", "every")
                for variant in order:
                    env = {"SCENARIO_ITERS": str(args.iters)}
                    if variant == "one":
                        env["SCENARIO_ACTIVE_PAIRS"] = "1"
                    (every if variant == "every" else one).extend(launch(pairs, env))
            doc = stats_of(pairs, args.iters, work)
            host = doc["hosts"][0]
            counts = ", ".join(f"{k}: {v['median_us']:.0f} µs ({v['collectives']})" for k, v in host["at_once"].items())
            kinds = ", ".join(h["kind"] for h in doc["hints"]) or "none"
            said = f"groups at once -> median (collectives): {counts}; hints, most to gain first: {kinds}"
            print(f"{pairs:>5} {pairs + 1:>6} {statistics.median(every):>23.0f} {statistics.median(one):>19.0f}  {said}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
