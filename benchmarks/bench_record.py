"""`python benchmarks/bench_record.py`: what recording costs, measured side by side in one run.

1. Micro: a world-size-1 gloo all_reduce loop of a small tensor in three persistent child
   processes, driven in interleaved rounds (plain, recorded, TORCH_DISTRIBUTED_DEBUG=DETAIL, then
   again ...) so that machine noise hits every variant alike. The recorded child also runs rounds
   with its recorder paused (kernels and patches installed, `active` off). Reports the median
   microseconds per call, the added microseconds per collective and the ratios.
2. DDP: a small MLP trained for --steps steps on 2 ranks under torchrun, plain and recorded
   launches alternating; reports the median step time of each launch and the ratio.
3. Bytes per event: size of the recorded child's log (one call site, repeated) divided by its
   number of collective records; the same for the recorded DDP logs.
4. DDP, world size 1, in one process: the same MLP under COLLCHECK=1, blocks of 10 steps
   alternating recording / paused (`rec.active`), so that the ratio compares steps of one
   process; once with the Python path (COLLCHECK_FASTPATH=0) and once with the compiled fast path
   (when built: `collcheck build-fastpath`), launches alternating. Reports the median
   recorded/paused step-time ratio of each path and the microseconds added per collective.

Sections 1-3 record with whichever path is in use (the compiled one when built).

DETAIL is never combined with DDP (it segfaults in DDP.__init__ on torch 2.13 CPU, capture.md).
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
             "TORCH_DISTRIBUTED_DEBUG", "TORCHELASTIC_RUN_ID")


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

def _micro_worker(variant: str, log_dir: str) -> None:
    """Persistent child: reads `round N [paused]` lines, answers with the per-call times (ns)."""
    import datetime

    import torch

    torch.set_num_threads(1)
    rec = None
    if variant == "record":
        import collcheck

        rec = collcheck.enable(log_dir, run_id="micro", hang_seconds=0)
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=30))
    t = torch.ones(16)
    all_reduce = dist.all_reduce
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
        times = []
        append = times.append
        for _ in range(n):
            t0 = clock()
            all_reduce(t)
            append(clock() - t0)
        if rec is not None:
            rec.active = True
        print(json.dumps(times), flush=True)
    dist.destroy_process_group()


def _mlp_steps(steps: int, rank: int = 0) -> dict:
    """Train the MLP for 20 warm-up + `steps` steps; under COLLCHECK=1 blocks of 10 steps
    alternate recording / paused (same process: noise hits both alike). Step times in ns."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
    loss_fn = torch.nn.CrossEntropyLoss()
    from collcheck.capture import session

    rec = session.recorder()  # set when launched with COLLCHECK=1
    times = {"plain": []} if rec is None else {"record": [], "paused": []}
    recorded = 0
    for i in range(steps + 20):
        if rec is not None:
            rec.active = (i // 10) % 2 == 0
            recorded += rec.active
        t0 = time.perf_counter_ns()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        if i >= 20:
            times["plain" if rec is None else "record" if rec.active else "paused"].append(time.perf_counter_ns() - t0)
    if rec is not None:
        rec.active = True
        times["recorded_steps"] = recorded
    return times


def _path() -> str:
    from collcheck.capture import kernels

    return "compiled" if kernels._compiled else "python"


def _pin(index: int) -> None:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:  # one core per rank: without it the step time swings 2x between launches
        os.sched_setaffinity(0, {cpus[index % len(cpus)]})


def _ddp_worker(steps: int, out_path: str) -> None:
    import datetime

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank = dist.get_rank()
    _pin(int(os.environ.get("LOCAL_RANK", rank)))
    times = _mlp_steps(steps, rank)
    times.pop("recorded_steps", None)
    dist.barrier()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


def _ddp1_worker(steps: int, out_path: str) -> None:
    """World size 1 under COLLCHECK=1: step times of recorded and paused blocks, and the path used."""
    import datetime

    import torch
    import torch.distributed as dist

    from collcheck.capture import session

    torch.set_num_threads(1)
    _pin(-1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    times = _mlp_steps(steps)
    rec = session.recorder()
    times.update(path=_path(), log=rec.writer.path)
    dist.destroy_process_group()
    with open(out_path, "w") as f:
        json.dump(times, f)


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------

class _Child:
    def __init__(self, variant: str, log_dir: str):
        env = _clean_env(**({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"} if variant == "detail" else {}))
        self.variant = variant
        self.proc = subprocess.Popen([sys.executable, SCRIPT, "--micro-worker", variant,
                                      "--log-dir", log_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)
        hello = json.loads(self._line())
        self.log, self.path = hello["log"], hello["path"]

    def _line(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"micro child {self.variant!r} died (exit {self.proc.poll()})")
        return line

    def round(self, n: int, paused: bool = False) -> list[int]:
        self.proc.stdin.write(f"round {n}{' paused' if paused else ''}\n")
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
    from collcheck import logformat as lf
    from collcheck.reader import read_log

    return sum(1 for r in read_log(path).records if r.get("k") == lf.COLL)


def bench_micro(rounds: int, calls: int, work: str) -> dict:
    children = {v: _Child(v, os.path.join(work, "micro")) for v in ("plain", "record", "detail")}
    samples = {k: [] for k in ("plain", "paused", "record", "detail")}
    round_medians = {k: [] for k in samples}
    try:
        for i in range(rounds):
            order = [("plain", False), ("record", False), ("detail", False), ("record", True)]
            if i % 2:
                order.reverse()
            for variant, paused in order:
                times = children[variant].round(calls, paused)
                key = "paused" if paused else variant
                samples[key] += times
                round_medians[key].append(statistics.median(times))
    finally:
        for c in children.values():
            c.close()
    log, path = children["record"].log, children["record"].path
    size, colls = os.path.getsize(log), _count_colls(log)
    med = {k: statistics.median(v) / 1000 for k, v in samples.items()}
    return {"median_us": med, "round_medians_us": {k: [x / 1000 for x in v] for k, v in round_medians.items()},
            "p90_us": {k: sorted(v)[int(len(v) * 0.9)] / 1000 for k, v in samples.items()},
            "log_bytes": size, "log_colls": colls, "calls": sum(len(v) for v in samples.values()), "path": path}


def bench_ddp(pairs: int, steps: int, work: str) -> dict:
    results = {"plain": [], "record": [], "paused": []}
    logs = []
    for i in range(pairs):
        order = ["plain", "record"] if i % 2 == 0 else ["record", "plain"]
        for variant in order:
            out = os.path.join(work, f"ddp-{variant}-{i}.json")
            env = _clean_env()
            if variant == "record":
                run_id = f"ddp-{i}"
                env.update(COLLCHECK="1", COLLCHECK_DIR=os.path.join(work, "ddp"), COLLCHECK_RUN_ID=run_id)
                logs.append(os.path.join(work, "ddp", run_id))
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
                   "127.0.0.1", "--master-port", str(_free_port()), SCRIPT, "--ddp-worker",
                   "--steps", str(steps), "--out", out]
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"DDP {variant} run failed:\n{proc.stderr[-3000:]}")
            with open(out) as f:
                for key, times in json.load(f).items():
                    results[key].append(statistics.median(times) / 1e6)
    sizes = colls = 0
    for d in logs:
        for name in os.listdir(d):
            if name.endswith(".msgpack"):
                sizes += os.path.getsize(os.path.join(d, name))
                colls += _count_colls(os.path.join(d, name))
    return {"step_ms": results, "log_bytes": sizes, "log_colls": colls}


def bench_ddp1(pairs: int, steps: int, work: str) -> dict:
    """Section 4: per path, the medians of each launch's recorded/paused step times."""
    out = {"python": [], "compiled": []}
    for i in range(pairs):
        for setting in (("0", "1") if i % 2 == 0 else ("1", "0")):
            path = os.path.join(work, f"ddp1-{setting}-{i}.json")
            env = _clean_env(COLLCHECK="1", COLLCHECK_DIR=os.path.join(work, "ddp1"), COLLCHECK_RUN_ID=f"ddp1-{i}",
                             COLLCHECK_FASTPATH=setting, COLLCHECK_HANG_SECONDS="0")
            proc = subprocess.run([sys.executable, SCRIPT, "--ddp1-worker", "--steps",
                                   str(steps), "--out", path], env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise RuntimeError(f"world-size-1 DDP run failed:\n{proc.stderr[-3000:]}")
            with open(path) as f:
                t = json.load(f)
            if setting == "1" and t["path"] != "compiled":
                return {"python": out["python"], "compiled": [], "not_built": True}
            rec, paused = statistics.median(t["record"]) / 1e6, statistics.median(t["paused"]) / 1e6
            colls = _count_colls(t["log"]) / max(t["recorded_steps"], 1)  # collectives per recorded step
            out[t["path"]].append({"record_ms": rec, "paused_ms": paused, "ratio": rec / paused,
                                   "added_us_per_coll": (rec - paused) * 1000 / max(colls, 1), "colls_per_step": colls})
    return out


def _print_ddp1(res: dict, pairs: int, steps: int, seconds: float) -> None:
    print(f"\n4. DDP MLP, world size 1, one core, in one process: blocks of 10 steps alternate recording / "
          f"paused; {steps} steps per launch, {pairs} launches per path, alternating ({seconds:.0f} s)")
    print(f"   {'path':10} {'launch':>6} {'recorded ms':>12} {'paused ms':>10} {'ratio':>7} {'us/coll':>8} "
          f"{'colls/step':>10}")
    for path in ("python", "compiled"):
        for i, r in enumerate(res[path]):
            print(f"   {path:10} {i:6d} {r['record_ms']:12.3f} {r['paused_ms']:10.3f} {r['ratio']:6.3f}x "
                  f"{r['added_us_per_coll']:8.1f} {r['colls_per_step']:10.2f}")
    for path in ("python", "compiled"):
        if res[path]:
            ratio = statistics.median(r["ratio"] for r in res[path])
            added = statistics.median(r["added_us_per_coll"] for r in res[path])
            print(f"   median {path}: recorded/paused {ratio:.3f}x, {added:.1f} us added per collective")
    if res.get("not_built"):
        print("   compiled fast path: not built for this torch (collcheck build-fastpath); not measured")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_record.py", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=10, help="interleaved rounds per variant (micro)")
    p.add_argument("--calls", type=int, default=1000, help="all_reduce calls per round (micro)")
    p.add_argument("--pairs", type=int, default=3, help="plain/recorded DDP launch pairs")
    p.add_argument("--steps", type=int, default=200, help="DDP steps per launch (after 20 warm-up steps)")
    p.add_argument("--skip-ddp", action="store_true")
    p.add_argument("--ddp1-pairs", type=int, default=3, help="world-size-1 launches per path (section 4)")
    p.add_argument("--ddp1-steps", type=int, default=600, help="world-size-1 DDP steps per launch (section 4)")
    p.add_argument("--only-ddp1", action="store_true", help="run section 4 only")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    p.add_argument("--micro-worker", choices=("plain", "record", "detail"), help=argparse.SUPPRESS)
    p.add_argument("--ddp-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ddp1-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--log-dir", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if min(args.steps, args.ddp1_steps) < 20:  # blocks of 10 alternate recorded / paused
        p.error("--steps and --ddp1-steps need at least 20 (one recorded and one paused block of 10)")
    if args.micro_worker:
        _micro_worker(args.micro_worker, args.log_dir)
        return 0
    if args.ddp_worker:
        _ddp_worker(args.steps, args.out)
        return 0
    if args.ddp1_worker:
        _ddp1_worker(args.steps, args.out)
        return 0

    import torch

    print(f"collcheck bench_record: torch {torch.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-") as work:
        if args.only_ddp1:
            t0 = time.monotonic()
            res = bench_ddp1(args.ddp1_pairs, args.ddp1_steps, work)
            _print_ddp1(res, args.ddp1_pairs, args.ddp1_steps, time.monotonic() - t0)
            if args.json:
                print(json.dumps({"ddp1": res}, indent=1))
            return 0
        t0 = time.monotonic()
        micro = bench_micro(args.rounds, args.calls, work)
        m = micro["median_us"]
        print(f"\n1. world-size-1 gloo all_reduce of 16 floats: {args.rounds} interleaved rounds x {args.calls} calls "
              f"per variant ({time.monotonic() - t0:.0f} s); recording path: {micro['path']}")
        rows = [("plain", "plain"), ("collcheck installed, paused", "paused"), ("collcheck recording", "record"),
                ("TORCH_DISTRIBUTED_DEBUG=DETAIL", "detail")]
        print(f"   {'variant':32} {'median us/call':>15} {'p90 us':>9} {'added us':>9} {'ratio':>7}")
        for label, key in rows:
            print(f"   {label:32} {m[key]:15.1f} {micro['p90_us'][key]:9.1f} {m[key] - m['plain']:9.1f} "
                  f"{m[key] / m['plain']:7.2f}x")
        spread = {k: (min(v), max(v)) for k, v in micro["round_medians_us"].items()}
        print("   round medians (min-max us): " + ", ".join(f"{k} {a:.1f}-{b:.1f}" for k, (a, b) in spread.items()))
        print(f"   recording vs DETAIL: {m['record'] - m['plain']:.1f} vs {m['detail'] - m['plain']:.1f} us added; "
              f"recording costs {(m['record'] - m['plain']) / max(m['detail'] - m['plain'], 1e-9):.2f}x what DETAIL adds")
        bpe = micro["log_bytes"] / max(micro["log_colls"], 1)
        print(f"\n3. log size, one repeated call site: {micro['log_bytes']} bytes / {micro['log_colls']} collective "
              f"records = {bpe:.1f} bytes per event")
        figures = {"micro": micro}
        if not args.skip_ddp:
            t0 = time.monotonic()
            ddp = bench_ddp(args.pairs, args.steps, work)
            sp, sr, sq = ddp["step_ms"]["plain"], ddp["step_ms"]["record"], ddp["step_ms"]["paused"]
            print(f"\n2. DDP MLP (256-512-512-10, batch 128), 2 ranks pinned to one core each, {args.steps} steps per "
                  f"launch, {args.pairs} plain/COLLCHECK=1 launch pairs alternating ({time.monotonic() - t0:.0f} s);")
            print("   in a COLLCHECK=1 launch, blocks of 10 steps alternate recording / paused (same process)")
            print(f"   {'pair':>4} {'plain ms':>9} {'recorded ms':>12} {'paused ms':>10} {'rec/plain':>10} "
                  f"{'rec/paused':>11}")
            for i, (a, b, c) in enumerate(zip(sp, sr, sq)):
                print(f"   {i:4d} {a:9.3f} {b:12.3f} {c:10.3f} {b / a:9.3f}x {b / c:10.3f}x")
            mp, mr, mq = (statistics.median(v) for v in (sp, sr, sq))
            within = statistics.median(b / c for b, c in zip(sr, sq))
            print(f"   median: plain {mp:.3f} ms, recorded {mr:.3f} ms, paused {mq:.3f} ms; recorded/plain "
                  f"{mr / mp:.3f}x across launches, recorded/paused {within:.3f}x within launches")
            dbpe = ddp["log_bytes"] / max(ddp["log_colls"], 1)
            print(f"   DDP logs: {ddp['log_bytes']} bytes / {ddp['log_colls']} collective records = {dbpe:.1f} bytes "
                  f"per event (all records included)")
            figures["ddp"] = ddp
        if not args.skip_ddp:
            t0 = time.monotonic()
            figures["ddp1"] = bench_ddp1(args.ddp1_pairs, args.ddp1_steps, work)
            _print_ddp1(figures["ddp1"], args.ddp1_pairs, args.ddp1_steps, time.monotonic() - t0)
        if args.json:
            figures["micro"].pop("round_medians_us", None)
            print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
