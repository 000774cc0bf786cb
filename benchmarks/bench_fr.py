"""Benchmark of the first read of Flight Recorder dumps: `collcheck diff` on a fresh cache against
torch's own analyzer (`torchfrtrace`), on the same dumps, side by side.

    python benchmarks/bench_fr.py --ranks 1024 --entries 2000 --repeat 3 --check-divergence

The dumps are `collcheck export --format fr` of a synthetic clean run (collcheck.synth.write_clean_run),
written once under --dir (default /tmp/collcheck-bench-fr) and kept: later runs reuse them. Each
round runs both commands, alternating which goes first (a drift of the machine falls on both):
`python -m torch.distributed.flight_recorder.fr_trace DUMPS -p rank_` and `python -m collcheck diff
DUMPS` with an empty cache (XDG_CACHE_HOME: the conversion is part of what is timed), then collcheck
once more on that cache (the second read). Each under /usr/bin/time (wall time, peak RSS of the
largest process), with the RSS of the whole process tree sampled meanwhile (collcheck reads in
worker processes: their memory counts). Prints medians and the ratios.

--check-divergence: dumps of the same size with one rank out of step (synth.bulk.Divergence at a
random rank and slot, --seed, --kind) must give exactly that finding: kind, slot of the world group,
rank. COLLCHECK_FASTPATH=0 for every collcheck command (a tree without the compiled recording path
would otherwise build it in the background meanwhile; reading dumps does not use it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

THIS_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FINDING_KIND = {"missing": "missing", "extra": "extra", "shape": "shape_mismatch"}
BARRIER_EVERY = (8, 6)  # the synthetic program's barrier: slot % 8 == 6 (no tensors: no shape to change)


def _env(cache: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (THIS_TREE, os.environ.get("PYTHONPATH")) if p),
               COLLCHECK_FASTPATH="0")
    if cache is not None:
        env["XDG_CACHE_HOME"] = cache
    return env


def write_dumps(directory: str, ranks: int, entries: int, diverge: tuple | None = None) -> str:
    """The dumps of a synthetic run under `directory` (written unless a complete set is there)."""
    wanted = {"ranks": ranks, "entries": entries, "diverge": list(diverge) if diverge else None}
    marker = os.path.join(directory, "complete.json")
    dumps = os.path.join(directory, "dumps")
    try:
        with open(marker) as f:
            if json.load(f) == wanted:
                return dumps
    except (OSError, ValueError):
        pass
    sys.path.insert(0, THIS_TREE)
    from collcheck.synth import write_clean_run
    from collcheck.synth.bulk import Divergence

    shutil.rmtree(directory, ignore_errors=True)
    logs = os.path.join(directory, "logs")
    os.makedirs(logs)
    t0 = time.perf_counter()
    write_clean_run(logs, ranks, entries, diverge=Divergence(*diverge) if diverge else None)
    with tempfile.TemporaryDirectory() as cache:
        subprocess.run([sys.executable, "-m", "collcheck", "export", logs, "--format", "fr", "-o", dumps],
                       check=True, env=_env(cache), stdout=subprocess.DEVNULL)
    shutil.rmtree(logs)
    size = sum(os.path.getsize(os.path.join(dumps, f)) for f in os.listdir(dumps))
    print(f"wrote {ranks} dumps of {entries:,} entries ({size / 2**20:,.0f} MiB) in {time.perf_counter() - t0:.0f} s: "
          f"{dumps}", file=sys.stderr, flush=True)
    with open(marker, "w") as f:
        json.dump(wanted, f)
    return dumps


def _tree_rss(pid: int, stop: threading.Event, peak: list) -> None:
    """The largest sum of RSS of `pid` and its descendants, sampled every 0.1 s (psutil)."""
    try:
        import psutil
    except ImportError:
        peak.append(None)
        return
    best = 0
    try:
        root = psutil.Process(pid)
        while not stop.wait(0.1):
            total = 0
            for p in [root, *root.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            best = max(best, total)
    except psutil.Error:
        pass
    peak.append(best)


def measure(cmd: list[str], env: dict, expect: tuple) -> dict:
    """Wall time, CPU time (its processes' user + system: what the machine's other work does not
    change much) and peak RSS (largest process, /usr/bin/time; process tree, sampled) of a command."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        proc = subprocess.Popen(["/usr/bin/time", "-o", timing.name, "-f", "%e %M %U %S", *cmd], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        stop, peak = threading.Event(), []
        sampler = threading.Thread(target=_tree_rss, args=(proc.pid, stop, peak))
        sampler.start()
        _, err = proc.communicate()
        stop.set()
        sampler.join()
        wall, rss_kb, user, system = timing.read().split()[-4:]
    if proc.returncode not in expect:
        raise SystemExit(f"{' '.join(cmd[:4])}...: exit code {proc.returncode}, expected {expect}\n{err[-2000:]}")
    return {"wall_s": float(wall), "cpu_s": float(user) + float(system), "rss_mb": int(rss_kb) / 1024,
            "tree_mb": peak[0] / 2**20 if peak[0] else None}


def _load() -> str:
    """The machine's load averages (1, 5, 15 min, as `uptime` says them): other work competes for
    the CPUs, more with collcheck's worker processes than with torchfrtrace's one."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _round(dumps: str, torch_first: bool) -> dict:
    out = {"load": _load()}
    torch_cmd = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", dumps, "-p", "rank_"]
    collcheck_cmd = [sys.executable, "-m", "collcheck", "diff", dumps]
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-fr-cache-") as cache:
        for tool in (("torchfrtrace", "collcheck") if torch_first else ("collcheck", "torchfrtrace")):
            if tool == "torchfrtrace":
                out[tool] = measure(torch_cmd, _env(), (0,))
            else:
                out["collcheck"] = measure(collcheck_cmd, _env(cache), (0,))
                out["collcheck (second read)"] = measure(collcheck_cmd, _env(cache), (0,))
    out["load"] += f" -> {_load()}"
    return out


def check_divergence(args, rng: random.Random) -> bool:
    """A rank out of step at a random slot: the one finding is exactly that (kind, slot, rank)."""
    rank = rng.randrange(args.ranks)
    slot = rng.randrange(args.entries - 1)
    while args.kind == "shape" and slot % BARRIER_EVERY[0] == BARRIER_EVERY[1]:
        slot = rng.randrange(args.entries - 1)
    directory = os.path.join(args.dir, f"{args.ranks}x{args.entries}-{args.kind}-r{rank}-s{slot}")
    dumps = write_dumps(directory, args.ranks, args.entries, (rank, slot, args.kind))
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "collcheck", "diff", "--format", "json", dumps],
                              env=_env(cache), capture_output=True, text=True, check=False)
        secs = time.perf_counter() - t0
    report = json.loads(proc.stdout)
    got = [(f["kind"], f["group"], f["position"], f["ranks"]) for f in report["findings"]]
    want = [(FINDING_KIND[args.kind], "0", slot, [rank])]
    ok = proc.returncode == 1 and got == want
    print(f"divergence {args.kind} of rank {rank} at slot {slot}: {'found exactly' if ok else 'NOT FOUND'} "
          f"(exit {proc.returncode}, {secs:.1f} s; findings {got})", flush=True)
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_fr.py", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--entries", type=int, default=2000, help="entries per dump (torch keeps 2,000 by default)")
    p.add_argument("--repeat", type=int, default=3, metavar="N", help="rounds of both tools (default 3)")
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "collcheck-bench-fr"),
                   help="where the dumps are written once and kept (default %(default)s)")
    p.add_argument("--check-divergence", action="store_true", help="also check that a divergence is found exactly")
    p.add_argument("--kind", choices=sorted(FINDING_KIND), default="missing", help="the divergence (default missing)")
    p.add_argument("--seed", type=int, default=34, help="of the divergence's rank and slot")
    p.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = p.parse_args(argv)
    if not os.access("/usr/bin/time", os.X_OK):
        p.error("needs /usr/bin/time (GNU time)")
    dumps = write_dumps(os.path.join(args.dir, f"{args.ranks}x{args.entries}"), args.ranks, args.entries)
    size = sum(os.path.getsize(os.path.join(dumps, f)) for f in os.listdir(dumps))
    rounds = [_round(dumps, torch_first=r % 2 == 0) for r in range(args.repeat)]
    tools = [t for t in rounds[0] if t != "load"]
    medians = {t: {k: statistics.median(r[t][k] for r in rounds) if rounds[0][t][k] is not None else None
                   for k in rounds[0][t]} for t in tools}
    speedup = medians["torchfrtrace"]["wall_s"] / medians["collcheck"]["wall_s"]
    memory = medians["collcheck"]["rss_mb"] / medians["torchfrtrace"]["rss_mb"]
    ok = check_divergence(args, random.Random(args.seed)) if args.check_divergence else True
    if args.json:
        print(json.dumps({"ranks": args.ranks, "entries": args.entries, "bytes": size, "medians": medians,
                          "rounds": rounds, "speedup": speedup, "memory_ratio": memory, "divergence_ok": ok}))
        return 0 if ok else 1
    print(f"\n{args.ranks} ranks x {args.entries:,} entries ({size / 2**20:,.0f} MiB of dumps), {args.repeat} rounds, "
          f"alternating; medians; {os.cpu_count()} CPUs, load averages (1, 5, 15 min) by round: "
          f"{'; '.join(r['load'] for r in rounds)}")
    print(f"{'':<26} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13} {'tree RSS MiB':>13}")
    for t in tools:
        m = medians[t]
        tree = f"{m['tree_mb']:,.0f}" if m["tree_mb"] is not None else "-"
        print(f"{t:<26} {m['wall_s']:>8.1f} {m['cpu_s']:>8.1f} {m['rss_mb']:>13,.0f} {tree:>13}")
    for t in tools:
        print(f"  {t}: wall s by round {[r[t]['wall_s'] for r in rounds]}")
    cpu = medians["torchfrtrace"]["cpu_s"] / medians["collcheck"]["cpu_s"]
    print(f"first read: {speedup:.1f}x faster than torchfrtrace ({cpu:.1f}x less CPU time), {memory:.2f}x its peak RSS"
          + (f" ({medians['collcheck']['tree_mb'] / medians['torchfrtrace']['tree_mb']:.2f}x as a process tree)"
             if medians["collcheck"]["tree_mb"] and medians["torchfrtrace"]["tree_mb"] else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
