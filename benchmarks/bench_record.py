"""`python benchmarks/bench_record.py`: what recording costs per collective, measured side by side in one run.

1. A world-size-1 gloo all_reduce loop of a small tensor in five persistent child processes,
   driven in interleaved rounds (plain, recorded, recorded with live mode off (COLLCHECK_LIVE=0),
   TORCH_DISTRIBUTED_DEBUG=DETAIL, plain with torch's Flight Recorder off (TORCH_FR_BUFFER_SIZE=0:
   it records every collective by default, the floor recording is compared with), then again ...)
   so that machine noise hits every variant alike; `--launches` fresh sets of children, since
   every process sits a few us above or below any other on a shared machine. The recorded child
   also runs rounds with its recorder paused (`active` off: the compiled kernels unregister
   themselves, the Python kernels stay and return at once) and rounds with collcheck disabled
   (`collcheck.disable()`, enabled again after the round: nothing of collcheck in the call path);
   the live-off child runs the same paused and disabled rounds (not reported), so that the two
   recording children differ in live mode alone.
   Reports the median microseconds per call, the added microseconds per collective and the ratios;
   and, inside the recorded process, where no process-to-process difference enters, the median
   over rounds of (recorded round - paused round) and of (paused round - disabled round).
   The loop runs `--depth` user frames deep (a training script's collectives sit a few functions
   down: main, the loop, the step, a module's forward): the recorder walks every user frame to
   intern the call chain. With `--against DIR` (another collcheck source tree, e.g. a worktree
   of the previous release), a fourth child records with that collcheck, in the same rounds.
2. Bytes per event: size of the recorded child's logs (one call site, repeated) divided by their
   number of collective records.

It records with whichever path is in use (the compiled one when built). Training steps:
benchmarks/bench_steps.py; whole-process CPU: benchmarks/bench_cpu.py.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SCRIPT = os.path.abspath(__file__)  # child processes run this same script

_ENV_DROP = ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "COLLCHECK_HANG_SECONDS", "COLLCHECK_STACK",
             "TORCH_DISTRIBUTED_DEBUG", "TORCHELASTIC_RUN_ID", "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", **extra)
    return env


# --------------------------------------------------------------------------------------------
# children
# --------------------------------------------------------------------------------------------

def _at_depth(depth: int, fn):
    """Call fn `depth` user frames below this one."""
    return fn() if depth <= 1 else _at_depth(depth - 1, fn)


def _micro_worker(variant: str, log_dir: str, cpu: int, depth: int = 1) -> None:
    """Persistent child: reads `round N [paused|off]` lines, answers with the per-call times (ns).

    Pinned to one CPU with all its threads: a gloo call hands work to gloo's own thread, and
    whether the two threads share a core moves a call by ~8 us on a 2-core machine, per process."""
    import datetime

    if cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})  # before torch starts any thread: they inherit it

    import torch

    torch.set_num_threads(1)
    rec = None
    if variant in ("record", "nolive", "previous"):
        import collcheck

        def enable():
            return collcheck.enable(log_dir, run_id="micro", hang_seconds=0)

        rec = enable()
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    _at_depth(depth, lambda: _serve(variant, rec, enable if rec is not None else None, dist.all_reduce))
    dist.destroy_process_group()


def _serve(variant: str, rec, enable, all_reduce) -> None:
    """Warm up, then answer `round` lines until `quit` (at the benchmark's call depth)."""
    import torch

    t = torch.ones(16)
    clock = time.perf_counter_ns
    for _ in range(200):  # warm-up: caches, interned ids, allocator
        all_reduce(t)
    print(json.dumps({"ready": variant, "log": rec.writer.path if rec is not None else None,
                      "path": _path() if rec is not None else None}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        n = int(words[1])
        if rec is not None:
            rec.active = "paused" not in words
            if "off" in words:
                import collcheck

                collcheck.disable()
        times = []
        append = times.append
        for _ in range(n):
            t0 = clock()
            all_reduce(t)
            append(clock() - t0)
        if rec is not None:
            if "off" in words:
                rec = enable()  # a new log file in the same directory
            rec.active = True
        print(json.dumps(times), flush=True)


def _path() -> str:
    try:
        from collcheck.capture import dispatcher as kernels
    except ImportError:  # --against a tree from before the package's folders were its layers
        from collcheck.capture import kernels

    return "compiled" if kernels._compiled else "python"


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------

class _Child:
    def __init__(self, variant: str, log_dir: str, cpu: int = -1, depth: int = 1, against: str | None = None):
        env = _clean_env(**({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"} if variant == "detail" else
                            {"COLLCHECK_LIVE": "0"} if variant == "nolive" else
                            {"TORCH_FR_BUFFER_SIZE": "0"} if variant == "nofr" else {}))
        if variant == "previous":  # that tree's collcheck comes first on the path
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [against, env.get("PYTHONPATH")]))
        self.variant = variant
        self.proc = subprocess.Popen([sys.executable, SCRIPT, "--micro-worker", variant, "--log-dir", log_dir,
                                      "--cpu", str(cpu), "--depth", str(depth)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        hello = json.loads(self._line())
        self.log, self.path = hello["log"], hello["path"]

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"micro child {self.variant!r} died (exit {self.proc.poll()})")
        return line

    def round(self, n: int, state: str = "") -> list[int]:
        """`state`: "" (as launched), "paused" or "off" (collcheck disabled for the round)."""
        self.proc.stdin.write(f"round {n} {state}\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)
        except Exception:
            self.proc.kill()


def _count_colls(path: str) -> int:
    from collcheck.logfile import format as lf
    from collcheck.logfile.reader import read_log

    return sum(1 for r in read_log(path).records if r.get("k") == lf.COLL)


def _log_size(directory: str) -> tuple[int, int]:
    """(bytes, collective records) of every log under `directory`."""
    paths = [os.path.join(root, name) for root, _dirs, files in os.walk(directory)
             for name in files if name.endswith(".msgpack")]
    return sum(os.path.getsize(p) for p in paths), sum(_count_colls(p) for p in paths)


def bench_micro(rounds: int, calls: int, work: str, launches: int = 1, cpu: int = -1, depth: int = 1,
                against: str | None = None) -> dict:
    """`launches` fresh sets of children, `rounds` interleaved rounds each: every process sits a
    few us above or below any other on a shared machine, more launches average that out."""
    variants = ("plain", "record", "nolive", "detail", "nofr") + (("previous",) if against else ())
    samples = {k: [] for k in ("plain", "paused", "record", "detail", "off") + variants[2:]}
    round_medians = {k: [] for k in samples}
    for launch in range(launches):
        children = {v: _Child(v, os.path.join(work, f"micro-{launch}" if v != "previous" else f"prev-{launch}"),
                              cpu, depth, against) for v in variants}
        try:
            for i in range(rounds):
                # the live-off child pauses and disables as the recording child does (and its times
                # there are dropped): a re-enabled recorder starts a new log, so both carry that
                order = [("plain", ""), ("record", ""), ("nolive", ""), ("detail", ""), ("nofr", ""), ("record", "paused"),
                         ("nolive", "paused"), ("record", "off"), ("nolive", "off")]
                if against:
                    order.insert(2, ("previous", ""))
                if i % 2:
                    order.reverse()
                for variant, state in order:
                    times = children[variant].round(calls, state)
                    if variant == "nolive" and state:
                        continue
                    key = state or variant
                    samples[key] += times
                    round_medians[key].append(statistics.median(times))
        finally:
            for c in children.values():
                c.close()
    size, colls = _log_size(os.path.join(work, "micro-0"))
    med = {k: statistics.median(v) / 1000 for k, v in samples.items()}

    def in_process(a, b):
        return statistics.median(x - y for x, y in zip(round_medians[a], round_medians[b])) / 1000

    return {"median_us": med, "in_process_added_us": in_process("record", "paused"),
            "flight_recorder_added_us": med["plain"] - med["nofr"],
            "in_process_paused_us": in_process("paused", "off"), "path": children["record"].path,
            "previous_path": children["previous"].path if against else None,
            "round_medians_us": {k: [x / 1000 for x in v] for k, v in round_medians.items()},
            "p90_us": {k: sorted(v)[int(len(v) * 0.9)] / 1000 for k, v in samples.items()},
            "log_bytes": size, "log_colls": colls, "calls": sum(len(v) for v in samples.values())}


def _range(micro: dict, key: str) -> str:
    v = micro["round_medians_us"][key]
    return f"{min(v):.1f}-{max(v):.1f} us"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_record.py", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=10, help="interleaved rounds per variant and launch")
    p.add_argument("--calls", type=int, default=1000, help="all_reduce calls per round")
    p.add_argument("--launches", type=int, default=3, help="fresh sets of child processes")
    p.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1,
                   help="pin every child to this CPU (default: the last one; -1: leave them unpinned)")
    p.add_argument("--depth", type=int, default=6, help="user frames between the program's outermost frame and "
                   "the all_reduce call (the call chain the recorder walks)")
    p.add_argument("--against", metavar="DIR", help="another collcheck source tree (a checkout of the previous "
                   "release): a child recording with it runs in the same rounds")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    p.add_argument("--micro-worker", choices=("plain", "record", "nolive", "detail", "nofr", "previous"),
                   help=argparse.SUPPRESS)
    p.add_argument("--log-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.micro_worker:
        _micro_worker(args.micro_worker, args.log_dir, args.cpu, args.depth)
        return 0
    if args.against and not os.path.isdir(os.path.join(args.against, "collcheck")):
        p.error(f"--against {args.against}: no collcheck package there")

    import torch

    print(f"collcheck bench_record: torch {torch.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-") as work:
        t0 = time.monotonic()
        micro = bench_micro(args.rounds, args.calls, work, args.launches, args.cpu, args.depth,
                            os.path.abspath(args.against) if args.against else None)
    m = micro["median_us"]
    print(f"\n1. world-size-1 gloo all_reduce of 16 floats: {args.launches} launches x {args.rounds} interleaved "
          f"rounds x {args.calls} calls per variant ({time.monotonic() - t0:.0f} s); recording path: {micro['path']}; "
          f"{'children pinned to CPU ' + str(args.cpu) if args.cpu >= 0 else 'children unpinned'}; "
          f"the call {args.depth} user frames deep")
    rows = [("plain", "plain"), ("collcheck disabled (recorded pr.)", "off"),
            ("collcheck installed, paused", "paused"), ("collcheck recording", "record"),
            ("recording, live mode off", "nolive"), ("TORCH_DISTRIBUTED_DEBUG=DETAIL", "detail"),
            ("Flight Recorder off", "nofr")]
    if args.against:
        rows.insert(4, ("--against's collcheck recording", "previous"))
    print(f"   {'variant':32} {'median us/call':>15} {'p90 us':>9} {'added us':>9} {'ratio':>7}")
    for label, key in rows:
        print(f"   {label:32} {m[key]:15.1f} {micro['p90_us'][key]:9.1f} {m[key] - m['plain']:9.1f} "
              f"{m[key] / m['plain']:7.2f}x")
    spread = {k: (min(v), max(v)) for k, v in micro["round_medians_us"].items()}
    print("   round medians (min-max us): " + ", ".join(f"{k} {a:.1f}-{b:.1f}" for k, (a, b) in spread.items()))
    print(f"   inside the recorded process (median of per-round differences): recording adds "
          f"{micro['in_process_added_us']:.1f} us per call to its paused rounds, paused adds "
          f"{micro['in_process_paused_us']:.1f} us to its rounds with collcheck disabled")
    print(f"   live mode (on by default): recording adds {m['record'] - m['plain']:.1f} us per call with it, "
          f"{m['nolive'] - m['plain']:.1f} us with COLLCHECK_LIVE=0: {m['record'] - m['nolive']:+.1f} us "
          f"({m['record'] / m['nolive']:.3f}x); round medians with it {_range(micro, 'record')}, without "
          f"{_range(micro, 'nolive')}")
    print(f"   recording vs DETAIL: {m['record'] - m['plain']:.1f} vs {m['detail'] - m['plain']:.1f} us added; "
          f"recording costs {(m['record'] - m['plain']) / max(m['detail'] - m['plain'], 1e-9):.2f}x what DETAIL adds")
    fr = micro["flight_recorder_added_us"]
    print(f"   torch's Flight Recorder (on by default, TORCH_FR_BUFFER_SIZE=2000) adds {fr:.1f} us per call to its "
          f"rounds with it off (round medians {_range(micro, 'nofr')}); recording adds "
          f"{m['record'] - m['plain']:.1f} us, {(m['record'] - m['plain']) / fr if fr > 0 else float('nan'):.2f}x "
          f"what the Flight Recorder adds")
    if args.against:
        print(f"   this collcheck vs --against's ({micro['previous_path']} path): "
              f"{m['record'] - m['plain']:.1f} vs {m['previous'] - m['plain']:.1f} us added per call, "
              f"a difference of {m['record'] - m['previous']:+.1f} us")
    bpe = micro["log_bytes"] / max(micro["log_colls"], 1)
    print(f"\n2. log size, one repeated call site: {micro['log_bytes']} bytes / {micro['log_colls']} collective "
          f"records = {bpe:.1f} bytes per event")
    if args.json:
        micro.pop("round_medians_us", None)
        print(json.dumps({"micro": micro}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
