"""`python benchmarks/bench_stages.py`: where a recorded all_reduce's wall time goes, stage by stage.

Instruction counts (bench_instructions.py) miss what costs most on the recording path: the cache
misses of data the backend's thread pushed out while the caller waited, and the page faults of a
log's fresh pages. This benchmark builds the compiled path a second time with
-DCOLLCHECK_STAGE_CLOCK (a separate build: the flag is part of its name), under which the kernel
reads the CPU's time-stamp counter between its stages and sums the ticks of every call that took
the path without the GIL (every cached record's). `--launches` children, each pinned to one CPU
with its threads (as bench_record.py's), record `--calls` world-size-1 gloo all_reduces of 16
floats `--depth` user frames deep after a warm-up; the ticks are converted to nanoseconds with
the counter's rate measured against time.perf_counter_ns in the same child, and the cost of one
read of the counter (one per stage) taken off each stage. Reported: the median over launches of
each stage's mean ns per call, each launch's median call (a call the VM or gloo's thread
interrupted moves a mean, not the median), the completion callback that runs in gloo's thread
(per callback, and the share of calls that had one), and for scale torch's own part of the call
(the redispatch to gloo).

The stages, in the order a call meets them: entry (the kernel's checks), arguments (group name and
the key of the op's arguments), memo (the thread's last stack compared), state lock, writer lock
(the template and the log's lock), completions taken (label state, queued completions), packed
(clock, msgpack), framed (CRC-32), copied (into the log's mapping), left (in-flight table, back to
the kernel), then torch (redispatch) and watched (the clock, the future's callback registered).

The stage clock sees only the kernel's own time. With `--parts R` each child then weighs the
kernel's parts by the wall, in the same process: R rounds, each of `--part-calls` calls per part
in turn: paused (collcheck's kernels unregistered: torch alone), the dispatcher's hop alone (the
kernel registered, redispatching at once), the record without its completion watched (the
Work's future never asked), and the whole record. Reported: the median over all rounds of each
part's median call minus the paused median of the same round, and their differences (what the
record adds to the hop, what watching the completion adds), which include what the kernel's
code costs torch's own code after it (the lines it pushed out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_record import _at_depth, _clean_env, _free_port  # noqa: E402

SCRIPT = os.path.abspath(__file__)
FLAG = "-DCOLLCHECK_STAGE_CLOCK"
STAGES = ("entry", "arguments", "memo", "state lock", "writer lock", "completions taken", "packed", "framed",
          "copied", "left", "torch (redispatch)", "watched")
OURS = [s for s in STAGES if s != "torch (redispatch)"]
PARTS = {"paused": None, "hop": 1, "unwatched": 2, "whole": 0}  # fastpath.cpp's Part, per round in this order
PART_LABELS = {"hop": "the dispatcher's hop alone", "unwatched": "the record, completion not watched",
               "whole": "the whole record (recording as shipped)"}


def _stage_build():
    """The fast path module built with the stage clock (compiled on first use, ~1 min)."""
    from collcheck.capture.native import fastpath

    if FLAG not in fastpath.CFLAGS:
        fastpath.CFLAGS = (*fastpath.CFLAGS, FLAG)  # the build's name hashes its flags
    if not os.path.exists(fastpath.library_path()):
        print("bench_stages: compiling the fast path with the stage clock (about a minute) ...", file=sys.stderr,
              flush=True)
        fastpath.build()
    return fastpath


def _ticks_per_ns(module) -> float:
    """The stage clock's rate (the CPU's time-stamp counter), against perf_counter_ns over 0.2 s."""
    t0, c0 = time.perf_counter_ns(), module.stage_clock()[4]
    time.sleep(0.2)
    t1, c1 = time.perf_counter_ns(), module.stage_clock()[4]
    return (c1 - c0) / (t1 - t0)


def _launch(work: str, launch: int, args, tree: str | None) -> dict:
    """One child (with `tree`'s collcheck first on the path when given); its figures."""
    env = _clean_env()
    if tree:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, SCRIPT, "--child", "--log-dir", os.path.join(work, f"{launch}-{bool(tree)}"),
                           "--calls", str(args.calls), "--depth", str(args.depth), "--cpu", str(args.cpu),
                           "--parts", str(0 if tree else args.parts), "--part-calls", str(args.part_calls)],
                          capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _table(runs: list[dict]) -> tuple[dict, float, float, float]:
    """Medians over launches: per stage, the callback, the share of calls with one, ours in all."""
    med = {name: statistics.median(r["ns"][name] for r in runs) for name in STAGES}
    callback = statistics.median(r["callback_ns"] for r in runs)
    with_callback = sum(r["callbacks"] for r in runs) / max(sum(r["calls"] for r in runs), 1)
    return med, callback, with_callback, sum(med[name] for name in OURS)


def _call_median(runs: list[dict]) -> float:
    """Median over launches of each launch's median calling-thread time per call."""
    return statistics.median(r["call_median_ns"] for r in runs)


def _per_torch(runs: list[dict]) -> float:
    """Median over launches of collcheck's calling-thread time over torch's redispatch time."""
    return statistics.median(sum(r["ns"][name] for name in OURS) / r["ns"]["torch (redispatch)"] for r in runs)


def _part_rounds(module, rec, all_reduce, rounds: int, calls: int) -> dict[str, list[float]]:
    """Per part, each round's median ns per call (the parts take turns within a round)."""
    clock = time.perf_counter_ns
    out: dict[str, list[float]] = {name: [] for name in PARTS}
    if rounds <= 0:
        return out
    if not hasattr(module, "stage_part"):  # (--against's launches are not weighed: their tree may predate it)
        raise SystemExit("bench_stages: --parts needs a tree whose stage build has stage_part")
    for _ in range(rounds):
        for name, part in PARTS.items():
            rec.active = part is not None
            module.stage_part(part or 0)
            times = []
            for _ in range(calls):
                t0 = clock()
                all_reduce()
                times.append(clock() - t0)
            out[name].append(statistics.median(times))
    rec.active = True
    module.stage_part(0)
    return out


def _parts_added(runs: list[dict]) -> dict[str, float]:
    """Per part, the median over every launch's rounds of (its round median - that round's paused)."""
    return {name: statistics.median(x - p for r in runs for x, p in zip(r["parts"][name], r["parts"]["paused"]))
            for name in PARTS if name != "paused"}


def _child(log_dir: str, calls: int, depth: int, cpu: int, parts: int = 0, part_calls: int = 1000) -> None:
    import datetime

    if cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    import torch

    torch.set_num_threads(1)
    fastpath = _stage_build()
    import collcheck

    rec = collcheck.enable(log_dir, run_id="stages", hang_seconds=0)
    module = fastpath.load()
    if module is None or module.stage_clock() is None:
        raise SystemExit("bench_stages: the stage-clock build did not load")
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    t = torch.ones(16)

    def run():
        for _ in range(2000):  # warm-up: templates cached, memo kept, allocator grown
            dist.all_reduce(t)
        before = module.stage_clock()
        for _ in range(calls):
            dist.all_reduce(t)
        after = module.stage_clock()
        return before, after, _part_rounds(module, rec, lambda: dist.all_reduce(t), parts, part_calls)

    (sums0, n0, cb0, cbn0, *_), (sums1, n1, cb1, cbn1, _, read, ours, torch_ticks), part_ns = _at_depth(depth, run)
    dist.destroy_process_group()
    rate = _ticks_per_ns(module)
    n = max(n1 - n0, 1)
    # each stage and the callback hold one read of the clock: its cost is taken off
    print(json.dumps({"ns": {name: max((b - a) / n - read, 0) / rate for name, a, b in zip(STAGES, sums0, sums1)},
                      "calls": n1 - n0, "callback_ns": max((cb1 - cb0) / max(cbn1 - cbn0, 1) - read, 0) / rate,
                      "clock_read_ns": read / rate,
                      # per call, the median: a call the VM preempted moves the sums, not this
                      "call_median_ns": (statistics.median(ours[n0:]) - (len(STAGES) - 1) * read) / rate,
                      "call_median_torch_ns": (statistics.median(torch_ticks[n0:]) - read) / rate,
                      "callbacks": cbn1 - cbn0, "ticks_per_ns": rate, "parts": part_ns}), flush=True)


def _print_parts(runs: list[dict], parts: dict[str, float], args) -> None:
    paused = statistics.median(x for r in runs for x in r["parts"]["paused"])
    print(f"\n   by the wall, in one process: {args.parts} rounds x {args.part_calls} calls per part in each launch "
          f"(median over rounds of the part's median call minus the paused one's; paused: {paused:.0f} ns a call)")
    for name, label in PART_LABELS.items():
        print(f"   {label:44} {parts[name]:+8.0f} ns")
    print(f"   {'  of which the record beyond the hop':44} {parts['unwatched'] - parts['hop']:+8.0f} ns")
    print(f"   {'  of which watching the completion':44} {parts['whole'] - parts['unwatched']:+8.0f} ns")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_stages.py", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=20000, help="recorded all_reduces timed per launch")
    p.add_argument("--launches", type=int, default=5, help="fresh child processes")
    p.add_argument("--depth", type=int, default=6, help="user frames between the outermost frame and the call")
    p.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1, help="the CPU every child is pinned to "
                   "(-1: unpinned)")
    p.add_argument("--against", metavar="DIR", help="another collcheck tree with the stage clock (this benchmark's "
                   "commit or later): its launches alternate with this tree's")
    p.add_argument("--parts", type=int, default=0, metavar="R", help="then, in each of this tree's children, R rounds "
                   "weighing the kernel's parts by the wall (paused, the dispatcher's hop, the record unwatched, the "
                   "whole record)")
    p.add_argument("--part-calls", type=int, default=1000, help="calls per part in each of those rounds")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.log_dir, args.calls, args.depth, args.cpu, args.parts, args.part_calls)
        return 0
    if args.against:
        args.against = os.path.abspath(args.against)
        if not os.path.isdir(os.path.join(args.against, "collcheck")):
            p.error(f"--against {args.against}: no collcheck package there")
    _stage_build()  # here, once, not in every child
    import torch

    runs, against = [], []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="collcheck-stages-") as work:
        try:
            for launch in range(args.launches):  # with --against: alternating, this tree first on odd launches
                order = [None, args.against] if args.against else [None]
                for tree in order if launch % 2 == 0 else order[::-1]:
                    (against if tree else runs).append(_launch(work, launch, args, tree))
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            return 1
    med, callback, with_callback, ours = _table(runs)
    print(f"collcheck bench_stages: torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
          f"{args.launches} launches x {args.calls} recorded all_reduces, {args.depth} user frames deep, "
          f"{'pinned to CPU ' + str(args.cpu) if args.cpu >= 0 else 'unpinned'} ({time.monotonic() - t0:.0f} s); "
          f"calls on the path without the GIL: {min(r['calls'] for r in runs)}-{max(r['calls'] for r in runs)} per launch; "
          f"one read of the clock, taken off each stage: {statistics.median(r['clock_read_ns'] for r in runs):.1f} ns")
    other = _table(against) if against else None
    print(f"   {'stage':26} {'ns/call':>8} {'share':>7}   (median over launches; min-max)"
          + ("   --against's ns/call" if other else ""))
    for name in STAGES:
        vals = [r["ns"][name] for r in runs]
        share = f"{med[name] / ours:7.1%}" if name in OURS else " " * 7
        print(f"   {name:26} {med[name]:8.0f} {share}   {min(vals):.0f}-{max(vals):.0f}"
              + (f"   {other[0][name]:8.0f}" if other else ""))
    print(f"   {'collcheck in the calling thread':26} {ours:8.0f}" + (f"   {other[3]:30.0f}" if other else ""))
    print(f"   {'  the same, median call':26} {_call_median(runs):8.0f}           (a call the VM preempted moves the "
          f"mean above, not this)")
    print(f"   {'completion callback (gloo)':26} {callback:8.0f}           (per callback; {with_callback:.0%} of the "
          f"calls had one: an op complete before watched pushes its completion itself)")
    own = ours + callback * with_callback
    print(f"   collcheck's own wall time per call: {own:.0f} ns ({ours:.0f} in the calling thread, "
          f"{callback * with_callback:.0f} in gloo's); torch's redispatch to gloo: {med['torch (redispatch)']:.0f} ns")
    if other:
        theirs = other[3] + other[1] * other[2]
        print(f"   --against's: {theirs:.0f} ns (torch's redispatch {other[0]['torch (redispatch)']:.0f} ns); this tree "
              f"{own - theirs:+.0f} ns, {own / theirs:.2f}x")
        print(f"   per call, median of medians: this tree {_call_median(runs):.0f} ns, --against's "
              f"{_call_median(against):.0f} ns")
        # the machine's speed moves both: each launch's calling-thread time per ns of torch's own
        mine, their = _per_torch(runs), _per_torch(against)
        print(f"   per ns of torch's redispatch in the same launch (medians): this tree {mine:.4f}, --against's "
              f"{their:.4f}: {mine / their:.2f}x")
    parts = _parts_added(runs) if args.parts else None
    if parts:
        _print_parts(runs, parts, args)
    if args.json:
        print(json.dumps({"median_ns": med, "callback_ns": callback, "with_callback": with_callback, "ours_ns": ours,
                          "parts_added_ns": parts, "runs": runs, "against_runs": against}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
