"""Benchmark of `collcheck diff` on synthetic clean runs: load time, analysis time, peak memory.

    python benchmarks/bench_diff.py --ranks 64,1024 --events 10000
    python benchmarks/bench_diff.py --ranks 4096,32768 --cli --diverge missing --seed 1

Each size runs in a child process (so peak RSS is per size): it writes a clean run with
`collcheck.synth.write_clean_run` into a temporary directory (timed separately), then
times `load_run` and `analyse` in that same child. `--profile N` prints the top N
functions of a cProfile of load_run + analyse. `--cli` times the command itself instead
(`collcheck diff DIR --format json` in a process of its own: wall time and peak RSS), and
`--diverge KIND` puts one rank, drawn with `--seed`, out of step at a drawn slot: `found` says
whether the report's first finding is exactly that (kind, slot, culprit).

Side by side with another source tree (a worktree of the previous release, say):

    python benchmarks/bench_diff.py --ranks 1024 --against ../prev --repeat 2

runs each size's child with this tree and with that one (PYTHONPATH), alternating, `--repeat`
rounds of both, and prints both medians and their ratio (this / other) for load s, analyse s and
peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)  # child processes run this same script
THIS_TREE = os.path.dirname(os.path.dirname(SCRIPT))  # the source tree this script belongs to
COMPARED = (("load_s", "load s", ".3f"), ("analyse_s", "analyse s", ".3f"), ("peak_rss_mb", "peak RSS MB", ",.0f"))


def _child(ranks: int, events: int, groups: int, directory: str | None, profile: int, diverge: str | None = None,
           seed: int = 0, cli: bool = False) -> dict:
    import random

    import collcheck
    from collcheck.synth import write_clean_run

    tmp = directory or tempfile.mkdtemp(prefix=f"collcheck-bench-{ranks}x{events}-")
    try:
        subgroups = [list(range(k, ranks, groups)) for k in range(groups)] if groups > 1 else []
        rng = random.Random(seed)
        world_slots = events - events // 4 if subgroups else events  # (every 4th goes to a subgroup)
        odd, extra = None, {}
        if diverge:  # (a tree from before --diverge never gets here)
            from collcheck.synth.bulk import BARRIER, Divergence, world_body_op

            slot = rng.randrange(world_slots // 2)
            while diverge == "shape" and world_body_op(slot, bool(subgroups)) == BARRIER:
                slot += 1
            odd = extra["diverge"] = Divergence(rng.randrange(ranks), slot, diverge)
        t0 = time.perf_counter()
        write_clean_run(tmp, ranks, events, groups=subgroups, **extra)
        t_write = time.perf_counter() - t0
        size = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp))
        if cli:
            return {"ranks": ranks, "events": events, "bytes": size, "write_s": t_write, **_cli(tmp, odd),
                    "source": os.path.dirname(os.path.dirname(os.path.abspath(collcheck.__file__)))}
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
        first = report.findings[0] if report.findings else None
        return {"found": _found(odd, None if first is None else (first.kind, first.group, first.position, first.ranks)),
            "ranks": ranks, "events": events, "total_events": n, "bytes": size, "write_s": t_write,
            "load_s": t_load, "analyse_s": t_analyse, "verdict": report.verdict, "findings": len(report.findings),
            "events_per_s": n / (t_load + t_analyse) if t_load + t_analyse else 0.0,
            "rss_before_load_mb": rss_before / 1024, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            # load_run scans files in worker processes: their peak counts too (sum is an upper bound)
            "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "source": os.path.dirname(os.path.dirname(os.path.abspath(collcheck.__file__))),  # which tree ran
        }
    finally:
        if directory is None:
            shutil.rmtree(tmp, ignore_errors=True)


EXPECTED_KIND = {"missing": "missing", "shape": "shape_mismatch", "extra": "extra"}


def _found(odd, first: tuple | None) -> str:
    """'exact' when the first finding is the injected divergence (kind, group, slot, culprit)."""
    if odd is None:
        return "clean" if first is None else f"wrong: {first}"
    want = (EXPECTED_KIND[odd.kind], "0", odd.slot, [odd.rank])
    return "exact" if first is not None and tuple(first) == want else f"wrong: {first} (injected {want})"


def _cli(directory: str, odd) -> dict:
    """`collcheck diff DIR --format json` in its own process: wall time, peak RSS (the largest of
    the command and the worker processes it waited for: wait4's rusage), the first finding."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "collcheck", "diff", directory, "--format", "json"],
                            stdout=subprocess.PIPE)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    report = json.loads(out)
    f = report["findings"][0] if report["findings"] else None
    first = None if f is None else (f["kind"], f["group"], f["position"], f["ranks"])
    return {"cli_s": wall, "cli_peak_rss_mb": usage.ru_maxrss / 1024, "exit": proc.returncode,
            "verdict": report["verdict"], "findings": len(report["findings"]), "found": _found(odd, first)}


def _run_child(args, ranks: int, directory: str | None, tree: str | None = None) -> dict | None:
    """One size in a child process (its own peak RSS); with tree, that tree's collcheck first on
    PYTHONPATH. None when the child failed (said on stderr)."""
    cmd = [sys.executable, SCRIPT, "--child", "--ranks", str(ranks), "--events",
           str(args.events), "--groups", str(args.groups), "--profile", str(args.profile), "--seed", str(args.seed)]
    if args.diverge:
        cmd += ["--diverge", args.diverge]
    if args.cli:
        cmd += ["--cli"]
    if directory:
        cmd += ["--dir", directory]
    env = None
    if tree is not None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        print(f"{ranks} ranks{f' ({tree})' if tree else ''}: child failed with exit code {proc.returncode} "
              f"({'killed: out of memory?' if proc.returncode < 0 else 'see stderr'})", file=sys.stderr)
        return None
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    if tree is not None and os.path.realpath(row["source"]) != os.path.realpath(tree):
        print(f"{ranks} ranks: the child imported collcheck from {row['source']}, not from {tree}", file=sys.stderr)
        return None
    return row


def _single(args, sizes: list[int]) -> int:
    rows = []
    for ranks in sizes:
        row = _run_child(args, ranks, os.path.join(args.dir, f"{ranks}x{args.events}") if args.dir else None)
        if row is None:
            continue
        del row["source"]
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        elif args.cli:
            if len(rows) == 1:
                print(f"{'ranks':>6} {'ev/rank':>8} {'MB':>9} {'write s':>8} {'diff s':>8} {'peak RSS MB':>11} "
                      f"{'exit':>4}  verdict    found", flush=True)
            print(f"{row['ranks']:>6} {row['events']:>8} {row['bytes'] / 2**20:>9,.1f} {row['write_s']:>8.2f} "
                  f"{row['cli_s']:>8.2f} {row['cli_peak_rss_mb']:>11,.0f} {row['exit']:>4}  {row['verdict']:<10} "
                  f"{row['found']}", flush=True)
        else:
            if len(rows) == 1:
                print(f"{'ranks':>6} {'ev/rank':>8} {'events':>11} {'MB':>8} {'write s':>8} {'load s':>8} "
                      f"{'analyse s':>9} {'events/s':>11} {'peak RSS MB':>11} {'worker MB':>9}  verdict", flush=True)
            print(f"{row['ranks']:>6} {row['events']:>8} {row['total_events']:>11} {row['bytes'] / 2**20:>8.1f} "
                  f"{row['write_s']:>8.2f} {row['load_s']:>8.2f} {row['analyse_s']:>9.2f} "
                  f"{row['events_per_s']:>11,.0f} {row['peak_rss_mb']:>11,.0f} {row['worker_peak_rss_mb']:>9,.0f}  {row['verdict']} "
                  f"({row['found']})", flush=True)
    return 0 if len(rows) == len(sizes) else 1


def _side_by_side(args, sizes: list[int]) -> int:
    """Each size with this tree and the other, alternating (this first in even rounds, the other
    first in odd ones, so that a drift of the machine falls on both), medians side by side."""
    trees = {"this": THIS_TREE, "other": os.path.abspath(args.against)}
    if not args.json:
        print(f"this: {trees['this']}   other: {trees['other']}   {args.repeat} rounds each, alternating; "
              f"medians, ratio = this / other", flush=True)
    done = 0
    for ranks in sizes:
        rows: dict[str, list[dict]] = {"this": [], "other": []}
        order = [label for round_ in range(args.repeat) for label in (("this", "other"), ("other", "this"))[round_ % 2]]
        for position, label in enumerate(order):
            directory = os.path.join(args.dir, f"{ranks}x{args.events}-{label}-{position // 2}") if args.dir else None
            row = _run_child(args, ranks, directory, trees[label])
            if row is not None:
                rows[label].append({**row, "order": position})  # the child's place in the run
        done += all(len(rs) == args.repeat for rs in rows.values())  # a failed child fails the run
        if not rows["this"] or not rows["other"]:
            continue
        medians = {label: {key: statistics.median(r[key] for r in rs) for key, _, _ in COMPARED}
                   for label, rs in rows.items()}
        ratio = {key: medians["this"][key] / medians["other"][key] if medians["other"][key] else None
                 for key, _, _ in COMPARED}
        outcomes = {label: sorted({(r["verdict"], r["findings"], r["total_events"]) for r in rs})
                    for label, rs in rows.items()}
        if args.json:
            print(json.dumps({"ranks": ranks, "events": args.events, "ratio": ratio, **{
                label: {"tree": trees[label], **medians[label], "rounds": rows[label]} for label in rows}}), flush=True)
            continue
        print(f"\n{ranks} ranks x {args.events:,} collectives ({outcomes['this'][0][2]:,} events), "
              f"verdict {outcomes['this'][0][0]}")
        print(f"{'':<12} {'this':>10} {'other':>10} {'ratio':>7}")
        for key, name, fmt in COMPARED:
            shown = f"{ratio[key]:.2f}x" if ratio[key] is not None else "-"
            print(f"{name:<12} {medians['this'][key]:>10{fmt}} {medians['other'][key]:>10{fmt}} {shown:>7}", flush=True)
        if outcomes["this"] != outcomes["other"]:
            print(f"warning: the trees disagree on the run: this {outcomes['this']}, other {outcomes['other']} "
                  f"(verdict, findings, events)", flush=True)
    return 0 if done == len(sizes) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_diff.py", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", default="64", help="comma-separated rank counts (default 64)")
    p.add_argument("--events", type=int, default=10000, help="collectives per rank (default 10000)")
    p.add_argument("--groups", type=int, default=0,
                   help="strided subgroups that get every 4th collective (default 0: world group only)")
    p.add_argument("--dir", help="write the logs here and keep them (default: a temporary directory, removed)")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="print the top N functions (cProfile)")
    p.add_argument("--json", action="store_true", help="print one JSON object per size instead of a table")
    p.add_argument("--against", metavar="DIR",
                   help="another collcheck source tree (a worktree of the previous release): run each size with "
                        "it and with this tree, alternating, and print both medians and their ratio")
    p.add_argument("--repeat", type=int, default=2, metavar="N",
                   help="with --against: rounds of both trees per size (default 2)")
    p.add_argument("--diverge", choices=sorted(EXPECTED_KIND),
                   help="put one rank out of step at one slot of the world group (both drawn with --seed); "
                        "'found' says whether the first finding is exactly that")
    p.add_argument("--seed", type=int, default=0, help="with --diverge: the seed of the rank and slot (default 0)")
    p.add_argument("--cli", action="store_true",
                   help="time the command itself (`collcheck diff DIR --format json` in its own process: wall "
                        "time and peak RSS) instead of load_run and analyse in-process")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    sizes = [int(x) for x in args.ranks.split(",") if x.strip()]
    if args.child:
        print(json.dumps(_child(sizes[0], args.events, args.groups, args.dir, args.profile, args.diverge, args.seed,
                                args.cli)))
        return 0
    if args.against is None:
        return _single(args, sizes)
    if not os.path.isfile(os.path.join(args.against, "collcheck", "__init__.py")):
        p.error(f"--against {args.against}: not a collcheck source tree (no collcheck/__init__.py in it)")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    return _side_by_side(args, sizes)


if __name__ == "__main__":
    sys.exit(main())
