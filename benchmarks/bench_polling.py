"""`python benchmarks/bench_polling.py [--against DIR]`: what polling completions costs per collective.

Where a backend's futures complete at enqueue (NCCL; the simulated NCCL backend here), the recorder
keeps each collective's Work and its poller thread asks `is_completed()` every COLLCHECK_POLL_MS.
This measures, side by side in one run, a world-size-1 all_reduce loop of 16 floats in persistent
child processes driven in interleaved rounds (the order reversed every other round), fresh children
per `--launches`:

- gloo: plain; recorded as gloo is by default (its futures are truthful: nothing polled);
  recorded with COLLCHECK_COMPLETION=poll (every Work kept and polled);
- simnccl: plain; recorded (polled, as NCCL is).

With `--against DIR` (another collcheck source tree: the previous commit, whose recorder took
completion from the future or, on simnccl, from the backend itself), a child records with it on each
backend in the same rounds: "today's cost plus what polling adds". The time is the CPU's per call (on
simnccl the call returns at enqueue; each round ends at a sync point that waits for the stream).
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

SCRIPT = os.path.abspath(__file__)
BACKENDS = {"gloo": ("plain", "record", "poll"), "simnccl": ("plain", "record")}
_ENV_DROP = ("COLLCHECK", "COLLCHECK_DIR", "COLLCHECK_RUN_ID", "COLLCHECK_COMPLETION", "COLLCHECK_POLL_MS",
             "COLLCHECK_SIMNCCL", "TORCH_DISTRIBUTED_DEBUG", "TORCHELASTIC_RUN_ID", "PYTHONPATH")


def _worker(backend: str, variant: str, log_dir: str, cpu: int) -> None:
    """Persistent child: reads `round N` lines, answers with the per-call times (ns)."""
    import datetime
    import socket

    if cpu >= 0 and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})
    import torch

    torch.set_num_threads(1)
    if variant != "plain":
        import collcheck

        collcheck.enable(log_dir, run_id="poll", hang_seconds=0)
    import torch.distributed as dist

    if backend == "simnccl":
        import collcheck.simnccl  # noqa: F401 - registers the backend
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group(backend, rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    t = torch.ones(16)
    clock = time.perf_counter_ns
    for _ in range(200):
        dist.all_reduce(t)
    t.tolist()  # (a sync point on simnccl: the stream has run them)
    print(json.dumps({"ready": variant}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        times = []
        for _ in range(int(words[1])):
            t0 = clock()
            dist.all_reduce(t)
            times.append(clock() - t0)
        t.tolist()
        print(json.dumps(times), flush=True)
    dist.destroy_process_group()


class _Child:
    def __init__(self, backend: str, variant: str, log_dir: str, cpu: int, against: str | None):
        env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP}
        env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        if variant == "poll":
            env["COLLCHECK_COMPLETION"] = "poll"
        tree = against if variant == "previous" else os.path.dirname(os.path.dirname(SCRIPT))
        env["PYTHONPATH"] = tree  # the collcheck this child records with
        self.name = f"{backend}/{variant}"
        self.proc = subprocess.Popen([sys.executable, SCRIPT, "--worker", backend, variant, log_dir, str(cpu)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self._line()

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"child {self.name} died (exit {self.proc.poll()})")
        return line

    def round(self, n: int) -> list[int]:
        self.proc.stdin.write(f"round {n}\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def close(self) -> None:
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def measure(rounds: int, calls: int, launches: int, cpu: int, against: str | None, work: str,
            backends=tuple(BACKENDS)) -> dict:
    """{(backend, variant): per-round medians in µs}, every variant in the same interleaved rounds."""
    variants = [(b, v) for b in backends for v in BACKENDS[b] + (("previous",) if against else ())]
    medians: dict = {k: [] for k in variants}
    for launch in range(launches):
        children = {k: _Child(*k, os.path.join(work, f"{k[0]}-{k[1]}-{launch}"), cpu, against) for k in variants}
        try:
            for i in range(rounds):
                for k in (variants if i % 2 == 0 else variants[::-1]):
                    medians[k].append(statistics.median(children[k].round(calls)) / 1000)
        finally:
            for c in children.values():
                c.close()
    return medians


def added(medians: dict, backend: str, variant: str, base: str = "plain") -> float:
    """Median over rounds of (variant - base): the paired difference, µs per call."""
    return statistics.median(a - b for a, b in zip(medians[(backend, variant)], medians[(backend, base)], strict=True))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_polling.py", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--calls", type=int, default=1000, help="all_reduce calls per round")
    p.add_argument("--launches", type=int, default=3)
    p.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1, help="pin children to this CPU (-1: no)")
    p.add_argument("--against", metavar="DIR", help="another collcheck source tree recording beside this one")
    p.add_argument("--only", choices=tuple(BACKENDS), help="measure one backend only")
    p.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        backend, variant, log_dir, cpu = args.worker
        _worker(backend, variant, log_dir, int(cpu))
        return 0
    if args.against and not os.path.isdir(os.path.join(args.against, "collcheck")):
        p.error(f"--against {args.against}: no collcheck package there")
    against = os.path.abspath(args.against) if args.against else None
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="collcheck-poll-") as work:
        backends = (args.only,) if args.only else tuple(BACKENDS)
        med = measure(args.rounds, args.calls, args.launches, args.cpu, against, work, backends)
    print(f"collcheck bench_polling: world-size-1 all_reduce of 16 floats, {args.launches} launches x {args.rounds} "
          f"interleaved rounds x {args.calls} calls ({time.monotonic() - t0:.0f} s); children pinned to CPU {args.cpu}")
    print(f"   {'backend/variant':28} {'median us/call':>15} {'added us (paired)':>18}")
    for (backend, variant), values in med.items():
        extra = "" if variant == "plain" else f"{added(med, backend, variant):18.2f}"
        print(f"   {backend + '/' + variant:28} {statistics.median(values):15.2f} {extra}")
    if "gloo" in backends:
        print(f"   gloo: polling every Work adds {added(med, 'gloo', 'poll', 'record'):+.2f} us per call to recording "
              "as gloo is recorded by default (paired)")
    if against:
        for backend in backends:
            print(f"   {backend}: this collcheck vs --against's: {added(med, backend, 'record', 'previous'):+.2f} us "
                  "per call (paired)")
        if "gloo" in backends:
            print(f"   gloo with every Work polled vs --against's: {added(med, 'gloo', 'poll', 'previous'):+.2f} us "
                  "per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
