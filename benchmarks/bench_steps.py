"""`python benchmarks/bench_steps.py`: what recording costs per training step, side by side in one run.

Every COLLCHECK=1 launch alternates blocks of 10 steps recording / paused in the same process
(`rec.active`; paused, the compiled kernels are unregistered: the dispatcher runs as without
collcheck), so a launch compares its own steps. The figure per launch is the median over its
recorded blocks of (block median / mean of the two neighbouring paused block medians): pairing
neighbours cancels the drift of a noisy shared machine. Plain launches (no collcheck at all)
alternate with recorded ones for the across-launch ratio, which moves by several percent from
launch to launch on these machines.

1. DDP: a small MLP (256-512-512-10, batch 128) on 2 ranks under torchrun, one core each.
2. DDP, world size 1, one process: once on the Python path (COLLCHECK_FASTPATH=0) and once on the
   compiled path, launches alternating; also the microseconds added per collective.
3. FSDP2: `fully_shard` on each of four 256x256 layers and the root, 2 ranks, one core each.
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

from bench_record import _clean_env, _count_colls, _free_port

SCRIPT = os.path.abspath(__file__)
BLOCK = 10  # steps per recorded / paused block
WARMUP = 2 * BLOCK


# --------------------------------------------------------------------------------------------
# inside the training processes
# --------------------------------------------------------------------------------------------

def _alternate(step, steps: int) -> dict:
    """Run `step()` WARMUP + `steps` times; under COLLCHECK=1 blocks of BLOCK steps alternate
    recording / paused. Step times (ns) by kind, the median of each block, recorded steps."""
    from collcheck.capture import session

    rec = session.recorder()  # set when launched with COLLCHECK=1
    times = {"plain": []} if rec is None else {"record": [], "paused": []}
    blocks, cpu_blocks, block, recorded = [], [], [], 0
    cpu0 = time.process_time_ns()
    for i in range(WARMUP + steps):
        if rec is not None:
            rec.active = (i // BLOCK) % 2 == 0
            recorded += rec.active
        t0 = time.perf_counter_ns()
        step()
        dt = time.perf_counter_ns() - t0
        if i >= WARMUP:
            times["plain" if rec is None else "record" if rec.active else "paused"].append(dt)
            block.append(dt)
            if len(block) == BLOCK:
                blocks.append(statistics.median(block))
                cpu = time.process_time_ns()  # every thread of the process: gloo's too
                cpu_blocks.append((cpu - cpu0) / BLOCK)
                block = []
        if i % BLOCK == BLOCK - 1:
            cpu0 = time.process_time_ns()
    if rec is not None:
        rec.active = True
    times.update(blocks=blocks, cpu_blocks=cpu_blocks, recorded_steps=recorded)
    return times


def paired_ratios(blocks: list[float]) -> list[float]:
    """Per recorded block (even indexes): block / mean of its paused neighbours."""
    return [blocks[k] / ((blocks[k - 1] + blocks[k + 1]) / 2) for k in range(2, len(blocks) - 1, 2)]


def paired_ratio(blocks: list[float]) -> float | None:
    """Median over recorded blocks of block / mean of its paused neighbours."""
    ratios = paired_ratios(blocks)
    return statistics.median(ratios) if ratios else None


def _ddp_step(rank: int):
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

    def step():
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    return step


def _fsdp_step(rank: int, world: int):
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU()) for _ in range(4)],
                                torch.nn.Linear(256, 10))
    for layer in model[:4]:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(1 + rank)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return step


def _pin(index: int) -> None:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) >= 2:  # one core per rank: without it the step time swings 2x between launches
        os.sched_setaffinity(0, {cpus[index % len(cpus)]})


def _worker(model: str, steps: int, out_path: str) -> None:
    """One rank of a torchrun launch (world size from the environment), or world size 1 alone."""
    import datetime

    import torch
    import torch.distributed as dist

    from collcheck.capture import dispatcher as kernels, session

    torch.set_num_threads(1)
    if "RANK" not in os.environ:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    _pin(int(os.environ.get("LOCAL_RANK", rank)) if world > 1 else -1)
    step = _ddp_step(rank) if model == "ddp" else _fsdp_step(rank, world)
    times = _alternate(step, steps)
    rec = session.recorder()
    if rec is not None:
        times.update(path="compiled" if kernels._compiled else "python", log=rec.writer.path)
    dist.barrier()
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(times, f)
    dist.destroy_process_group()


# --------------------------------------------------------------------------------------------
# driver
# --------------------------------------------------------------------------------------------

def _launch(model: str, nproc: int, steps: int, out: str, env: dict, tries: int = 2) -> dict:
    """One launch; a failed one is retried once, and said: torch 2.13's gloo sometimes aborts a
    rank at exit ("terminate called without an active exception"), with or without collcheck."""
    worker = [SCRIPT, "--worker", model, "--steps", str(steps), "--out", out]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
               "127.0.0.1", "--master-port", str(_free_port()), *worker]
    else:
        cmd = [sys.executable, *worker]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:  # the ranks' own messages first: torchrun's summary fills the tail
        said = [line for line in proc.stderr.splitlines() if any(w in line for w in ("Error", "terminate", "what()"))]
        variant = "COLLCHECK=1" if env.get("COLLCHECK") else "plain"
        failure = f"{model} {variant} launch failed (exit {proc.returncode}):\n" + "\n".join(said[:20])
        if tries > 1:
            print(f"   ({failure.splitlines()[0]}: {'; '.join(said[:2])}; launched again)", flush=True)
            return _launch(model, nproc, steps, out, env, tries - 1)
        raise RuntimeError(failure + f"\n...\n{proc.stderr[-2000:]}")
    with open(out) as f:
        return json.load(f)


def _summary(t: dict) -> dict:
    ms = {k: statistics.median(t[k]) / 1e6 for k in ("plain", "record", "paused") if t.get(k)}
    out = {"step_ms": ms}
    if "record" in ms:
        out["ratio"] = paired_ratio(t["blocks"])
        out["cpu_ratio"] = paired_ratio(t["cpu_blocks"])  # CPU time of the process per step
        out["block_ratios"] = paired_ratios(t["blocks"])
        out["cpu_block_ratios"] = paired_ratios(t["cpu_blocks"])
        out["path"] = t["path"]
        colls = _count_colls(t["log"]) / max(t["recorded_steps"], 1)
        out["colls_per_step"] = colls
        out["bytes_per_event"] = os.path.getsize(t["log"]) / max(_count_colls(t["log"]), 1)  # rank 0, all records
        out["added_us_per_coll"] = (out["ratio"] - 1) * ms["paused"] * 1000 / max(colls, 1)
    return out


def bench_two_ranks(model: str, pairs: int, steps: int, work: str) -> list[dict]:
    """Plain and COLLCHECK=1 launches alternating: [{plain: summary, record: summary}] per pair."""
    out = []
    for i in range(pairs):
        pair = {}
        for variant in (("plain", "record") if i % 2 == 0 else ("record", "plain")):
            env = _clean_env()
            if variant == "record":
                env.update(COLLCHECK="1", COLLCHECK_DIR=os.path.join(work, model), COLLCHECK_RUN_ID=f"{model}-{i}")
            pair[variant] = _summary(_launch(model, 2, steps, os.path.join(work, f"{model}-{variant}-{i}.json"), env))
        out.append(pair)
    return out


def bench_world1(launches: int, steps: int, work: str) -> dict:
    """DDP world size 1 under COLLCHECK=1, the Python and the compiled path alternating."""
    out = {"python": [], "compiled": []}
    for i in range(launches):
        for setting in (("0", "1") if i % 2 == 0 else ("1", "0")):
            env = _clean_env(COLLCHECK="1", COLLCHECK_DIR=os.path.join(work, "ddp1"), COLLCHECK_RUN_ID=f"ddp1-{i}",
                             COLLCHECK_FASTPATH=setting)
            s = _summary(_launch("ddp", 1, steps, os.path.join(work, f"ddp1-{setting}-{i}.json"), env))
            if setting == "1" and s["path"] != "compiled":
                out["not_built"] = True
                continue
            out[s["path"]].append(s)
    return out


def _print_two_ranks(title: str, pairs: list[dict]) -> None:
    print(title)
    print(f"   {'pair':>4} {'plain ms':>9} {'recorded ms':>12} {'paused ms':>10} {'rec/plain':>10} {'rec/paused':>11} "
          f"{'CPU r/p':>8} {'colls/step':>10}")
    for i, p in enumerate(pairs):
        a, r = p["plain"]["step_ms"]["plain"], p["record"]
        print(f"   {i:4d} {a:9.3f} {r['step_ms']['record']:12.3f} {r['step_ms']['paused']:10.3f} "
              f"{r['step_ms']['record'] / a:9.3f}x {r['ratio']:10.3f}x {r['cpu_ratio']:7.3f}x {r['colls_per_step']:10.1f}")
    within, cpu = (statistics.median(r for p in pairs for r in p["record"][key])
                   for key in ("block_ratios", "cpu_block_ratios"))
    blocks = sum(len(p["record"]["block_ratios"]) for p in pairs)
    across = statistics.median(p["record"]["step_ms"]["record"] / p["plain"]["step_ms"]["plain"] for p in pairs)
    print(f"   recorded/paused {within:.3f}x: median over the {blocks} recorded blocks of all launches, each against "
          f"its paused neighbours (CPU time of rank 0's process {cpu:.3f}x; path: {pairs[0]['record']['path']})")
    print(f"   recorded/plain {across:.3f}x across launches (median of pairs); rank 0's log: "
          f"{statistics.median(p['record']['bytes_per_event'] for p in pairs):.1f} bytes per collective")


def _print_world1(res: dict) -> None:
    print(f"   {'path':10} {'launch':>6} {'recorded ms':>12} {'paused ms':>10} {'rec/paused':>11} {'us/coll':>8} "
          f"{'colls/step':>10}")
    for path in ("python", "compiled"):
        for i, r in enumerate(res[path]):
            print(f"   {path:10} {i:6d} {r['step_ms']['record']:12.3f} {r['step_ms']['paused']:10.3f} "
                  f"{r['ratio']:10.3f}x {r['added_us_per_coll']:8.1f} {r['colls_per_step']:10.2f}")
    for path in ("python", "compiled"):
        if res[path]:
            ratio = statistics.median(x for r in res[path] for x in r["block_ratios"])
            added = statistics.median(r["added_us_per_coll"] for r in res[path])
            print(f"   {path}: recorded/paused {ratio:.3f}x (median over the recorded blocks of all launches), "
                  f"{added:.1f} us added per collective (median of launches)")
    if res.get("not_built"):
        print("   compiled fast path: not built for this torch (collcheck build-fastpath); not measured")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_steps.py", description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=3, help="plain/recorded launch pairs (2-rank sections)")
    p.add_argument("--steps", type=int, default=400, help="DDP steps per 2-rank launch (after 20 warm-up steps)")
    p.add_argument("--fsdp-steps", type=int, default=400, help="FSDP2 steps per launch (after 20 warm-up steps)")
    p.add_argument("--world1-launches", type=int, default=3, help="world-size-1 launches per path")
    p.add_argument("--world1-steps", type=int, default=2000, help="world-size-1 DDP steps per launch")
    p.add_argument("--only", choices=("ddp", "world1", "fsdp"), help="run one section")
    p.add_argument("--json", action="store_true", help="print the figures as JSON too")
    p.add_argument("--worker", choices=("ddp", "fsdp"), help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if min(args.steps, args.fsdp_steps, args.world1_steps) < 4 * BLOCK:
        p.error(f"steps must be at least {4 * BLOCK} (recorded blocks between paused ones)")
    if args.worker:
        _worker(args.worker, args.steps, args.out)
        return 0

    import torch

    print(f"collcheck bench_steps: torch {torch.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
          f"blocks of {BLOCK} steps alternate recording / paused inside each COLLCHECK=1 launch", flush=True)
    figures = {}
    with tempfile.TemporaryDirectory(prefix="collcheck-bench-") as work:
        if args.only in (None, "ddp"):
            t0 = time.monotonic()
            figures["ddp"] = bench_two_ranks("ddp", args.pairs, args.steps, work)
            _print_two_ranks(f"\n1. DDP MLP, 2 ranks, one core each: {args.steps} steps per launch, {args.pairs} plain/"
                             f"COLLCHECK=1 launch pairs alternating ({time.monotonic() - t0:.0f} s)", figures["ddp"])
        if args.only in (None, "world1"):
            t0 = time.monotonic()
            figures["world1"] = bench_world1(args.world1_launches, args.world1_steps, work)
            print(f"\n2. DDP MLP, world size 1, one core: {args.world1_steps} steps per launch, {args.world1_launches} "
                  f"launches per path, alternating ({time.monotonic() - t0:.0f} s)")
            _print_world1(figures["world1"])
        if args.only in (None, "fsdp"):
            t0 = time.monotonic()
            figures["fsdp"] = bench_two_ranks("fsdp", args.pairs, args.fsdp_steps, work)
            _print_two_ranks(f"\n3. FSDP2 (fully_shard, 4 x 256x256 layers), 2 ranks, one core each: {args.fsdp_steps} "
                             f"steps per launch, {args.pairs} plain/COLLCHECK=1 launch pairs alternating "
                             f"({time.monotonic() - t0:.0f} s)", figures["fsdp"])
    if args.json:
        print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
