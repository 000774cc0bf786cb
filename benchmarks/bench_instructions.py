"""`python benchmarks/bench_instructions.py`: instructions recording adds per all_reduce (callgrind).

Wall time on a shared machine moves with the load; the number of instructions a call executes does
not. Each variant (plain torch, plain torch with its Flight Recorder off (TORCH_FR_BUFFER_SIZE=0:
it records every collective by default, the floor recording is compared with), recording with this
tree's collcheck, and with `--against DIR` another collcheck tree) runs in its own process under `valgrind --tool=callgrind` with
instrumentation off during start-up: the child sets up a world-size-1 gloo group, warms up, then
the driver turns instrumentation on (`callgrind_control -i on`), the child warms up again, the
driver zeroes the counters, the child runs N all_reduces of a 1-element tensor `--depth` user
frames deep, and the driver dumps the counters: every thread's instructions (Ir) over exactly
those N calls (gloo's threads and the completion callbacks included). Instructions per call added
= (recorded - plain) / N. With `--top K` the recorded child's dump is annotated: the K functions
with the most inclusive instructions, per call (where the added instructions go). With
`--cache-sim` callgrind also simulates the caches (the machine's own sizes) and each variant's
line misses per call are shown: lines the call brings into the first-level caches (instruction
and data), and into the last level. By the wall a recorded call costs more than its instructions
(lines that the switch to gloo's thread and back pushed out): this is the count that shows it.

The recorded children use whichever path is in use (the compiled one when built;
`COLLCHECK_FASTPATH=0` for the Python path). Wall time, paired against plain in alternating
rounds: benchmarks/bench_record.py.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)
_ENV_DROP = ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "COLLCHECK_HANG_SECONDS", "COLLCHECK_STACK",
             "TORCH_DISTRIBUTED_DEBUG", "TORCHELASTIC_RUN_ID", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


def _at_depth(depth: int, fn):
    return fn() if depth <= 1 else _at_depth(depth - 1, fn)


def _child(variant: str, log_dir: str, calls: int, depth: int) -> None:
    """Set up, warm up, then run `calls` all_reduces each time the driver says `go`."""
    import datetime
    import socket

    import torch

    torch.set_num_threads(1)
    rec = None
    if variant in ("record", "against"):
        import collcheck

        rec = collcheck.enable(log_dir, run_id="instr", hang_seconds=0)
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=600))
    t = torch.ones(1)
    path = "plain"
    if rec is not None:
        from collcheck.capture import dispatcher

        path = "compiled" if dispatcher._compiled else "python"

    def serve():
        for line in sys.stdin:
            if line.strip() != "go":
                break
            for _ in range(calls):
                dist.all_reduce(t)
            print("done", flush=True)

    for _ in range(50):
        dist.all_reduce(t)
    print(f"ready {path}", flush=True)
    _at_depth(depth, serve)
    dist.destroy_process_group()


class _Run:
    """One child under callgrind, instrumentation off until the driver turns it on."""

    def __init__(self, variant: str, work: str, calls: int, depth: int, against: str | None, cache_sim: bool = False):
        env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
        env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        if variant == "nofr":  # torch's Flight Recorder off: what it costs per call, the floor compared with
            env["TORCH_FR_BUFFER_SIZE"] = "0"
        if variant == "against":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [against, env.get("PYTHONPATH")]))
        self.out = os.path.join(work, f"callgrind.{variant}")
        self.proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
             *(["--cache-sim=yes"] if cache_sim else []),
             f"--callgrind-out-file={self.out}.%p",
             sys.executable, SCRIPT, "--child", variant, "--log-dir", os.path.join(work, variant),
             "--calls", str(calls), "--depth", str(depth)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.out + ".stderr", "w"), text=True, env=env)
        self.path = self._expect("ready").split()[1]

    def _expect(self, word: str) -> str:
        line = self.proc.stdout.readline()
        if not line.startswith(word):
            raise RuntimeError(f"child: expected {word!r}, got {line!r} (exit {self.proc.poll()})")
        return line

    def _control(self, *flags: str) -> None:
        subprocess.run(["callgrind_control", *flags, str(self.proc.pid)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def measure(self) -> tuple[dict[str, int], int]:
        """Events (Ir; with the cache simulation the misses too) of one round of `calls` all_reduces, after one instrumented warm-up round: (the calling
        thread's and the backend's threads', the other Python threads': collcheck's watchdog and
        live publisher, which wake up on a timer, not per call, and under callgrind's slowness
        would be charged to the few calls made meanwhile)."""
        self._control("-i", "on")
        self._go()  # warm-up under instrumentation (valgrind's translation caches)
        self._control("-z")
        self._go()
        before = set(glob.glob(self.out + ".*"))
        self._control("-d")
        self.dumps = sorted(p for p in set(glob.glob(self.out + ".*")) - before if not p.endswith(".stderr"))
        per_call: dict[str, int] = {}
        periodic = 0
        python_code = _ids_named(self.dumps, "_PyEval_EvalFrameDefault")
        for dump in self.dumps:
            events, fns = _thread_events(dump)
            if fns & python_code and not dump.endswith("-01"):  # (thread 1: the main thread)
                periodic += events["Ir"]
            else:
                for name, n in events.items():
                    per_call[name] = per_call.get(name, 0) + n
        return per_call, periodic

    def _go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        self._expect("done")

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=600)
        except Exception:
            self.proc.kill()


_FN = re.compile(r"^c?fn=\((\d+)\)(?: (.*))?$")


def _ids_named(dumps: list[str], name: str) -> set[str]:
    """The compressed function ids that stand for `name` (defined once, in any thread's file)."""
    ids = set()
    for dump in dumps:
        with open(dump, errors="replace") as f:
            for line in f:
                m = _FN.match(line.rstrip("\n"))
                if m and m.group(2) and m.group(2).split("'")[0] == name:
                    ids.add(m.group(1))
    return ids


def _thread_events(dump: str) -> tuple[dict[str, int], set[str]]:
    """({event: count} (Ir, and I1mr, D1mr, DLmr... with the cache simulation), the function ids
    it ran) of one thread's dump."""
    names, total, fns = ["Ir"], None, set()
    with open(dump, errors="replace") as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:"):  # (the period's events; `totals:` also counts open calls)
                total = dict(zip(names, map(int, line.split()[1:])))
            elif line.startswith("fn="):
                m = _FN.match(line.rstrip("\n"))
                if m:
                    fns.add(m.group(1))
    if total is None:
        raise RuntimeError(f"no totals in {dump}")
    return total, fns


def _top(dump: str, k: int, calls: int) -> list[tuple[float, str]]:
    """The k functions with the most inclusive Ir in `dump`, per call."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", dump], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")) / calls, m.group(2).strip()))
    return rows[:k]


def _misses(events: dict, n: int, level: str) -> float:
    """Lines missed per call at one level of the simulated caches ("1" or "L"), instructions and data."""
    return sum(events.get(k, 0) for k in (f"I{level}mr", f"D{level}mr", f"D{level}mw")) / n


def _print_misses(misses: dict, labels: dict) -> None:
    """Lines missed per call in the simulated caches ({variant: {"L1", "LL"}}), and added to plain."""
    plain = misses["plain"]
    print("\n   cache lines missed per call (callgrind's simulation: first level, instructions and data; last level)")
    print(f"   {'variant':34} {'L1 misses':>10} {'added':>8} {'LL misses':>10} {'added':>8}")
    for v, m in misses.items():
        print(f"   {labels[v]:34} {m['L1']:10.0f} {m['L1'] - plain['L1']:8.0f} {m['LL']:10.1f} {m['LL'] - plain['LL']:8.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_instructions.py", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="all_reduce calls counted per variant")
    p.add_argument("--depth", type=int, default=6, help="user frames between the outermost frame and the call")
    p.add_argument("--against", metavar="DIR", help="another collcheck source tree (e.g. a worktree of the "
                   "previous commit, its fast path built): counted the same way")
    p.add_argument("--top", type=int, default=0, help="annotate the recorded child: its K costliest functions")
    p.add_argument("--cache-sim", action="store_true", help="also simulate the caches: lines missed per call")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    p.add_argument("--keep", metavar="DIR", help="keep the callgrind dumps in DIR (callgrind_annotate them)")
    p.add_argument("--child", choices=("plain", "nofr", "record", "against"), help=argparse.SUPPRESS)
    p.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        _child(args.child, args.log_dir, args.calls, args.depth)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("bench_instructions: needs valgrind (callgrind_control) on PATH", file=sys.stderr)
        return 2
    if args.against and not os.path.isdir(os.path.join(args.against, "collcheck")):
        p.error(f"--against {args.against}: no collcheck package there")
    variants = ("plain", "nofr", "record") + (("against",) if args.against else ())
    ir, events, periodic, paths = {}, {}, {}, {}
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="collcheck-instr-") as work:
        for v in variants:
            run = _Run(v, work, args.calls, args.depth, os.path.abspath(args.against) if args.against else None,
                       args.cache_sim)
            try:
                (events[v], periodic[v]), paths[v] = run.measure(), run.path
                ir[v] = events[v]["Ir"]
                if v == "record" and args.top:
                    top = _top(run.dumps[0], args.top, args.calls)  # the calling thread's
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    for dump in run.dumps:
                        shutil.copy(dump, os.path.join(args.keep, f"callgrind.{v}.{dump.rpartition('.')[2]}"))
            finally:
                run.close()
    n = args.calls
    print(f"collcheck bench_instructions: world-size-1 gloo all_reduce of 1 float, {n} calls per variant, "
          f"{args.depth} user frames deep, under callgrind ({time.monotonic() - t0:.0f} s)")
    print("   instructions per call of the calling thread and the backend's threads (collcheck's timer threads apart)")
    print(f"   {'variant':34} {'instructions/call':>18} {'added':>8} {'timer threads/call':>19}")
    labels = {"plain": "plain torch", "nofr": "plain, Flight Recorder off", "record": f"recording ({paths['record']} path)",
              "against": f"--against's recording ({paths.get('against')} path)"}
    for v in variants:
        print(f"   {labels[v]:34} {ir[v] / n:18.0f} {(ir[v] - ir['plain']) / n:8.0f} {periodic[v] / n:19.0f}")
    fr = (ir["plain"] - ir["nofr"]) / n
    print(f"   torch's Flight Recorder (on by default) costs {fr:.0f} instructions per call (plain vs "
          f"TORCH_FR_BUFFER_SIZE=0); recording adds {(ir['record'] - ir['plain']) / n:.0f}, "
          f"{(ir['record'] - ir['plain']) / n / fr if fr > 0 else float('nan'):.2f}x the Flight Recorder's")
    if args.against:
        print(f"   this tree vs --against: {(ir['record'] - ir['against']) / n:+.0f} instructions per call")
    misses = ({v: {"L1": _misses(events[v], n, "1"), "LL": _misses(events[v], n, "L")} for v in variants}
              if args.cache_sim else None)
    if misses:
        _print_misses(misses, labels)
    if args.json:
        print(json.dumps({"calls": n, "paths": paths, "instructions": {v: ir[v] / n for v in variants},
                          "misses": misses}))
    if args.top:
        print(f"\n   recorded child, calling thread, inclusive instructions per call, top {args.top}:")
        for per_call, name in top:
            print(f"   {per_call:12.0f}  {name[:140]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
