"""The job benchmarks/gpu_check.py launches under torchrun (world size 1: NCCL refuses two ranks on
one GPU). It imports nothing of collcheck: whether it is recorded is COLLCHECK's business.

    kinds OUT --device D --backend B [--skip-kind K ...] [--sleep-ms MS]
        every collective kind, blocking and with async_op=True; on CUDA, all_reduces made slow on
        purpose (torch.cuda._sleep enqueued before them on the current stream: the collective
        cannot complete before the sleep ends); then this rank's Flight Recorder dump, through
        every dump API torch has, each into OUT/fr-<api>/comm_lib_trace_rank_<rank>.
        Writes OUT/kinds.json: what was issued, in order, and the GPU delays.
    loop OUT --device D --backend B --calls N --reps R
        N small blocking all_reduces, R times, each timed (CUDA: synchronized before and after).
        Writes OUT/loop.json: the microseconds per call of each repetition.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import torch
import torch.distributed as dist

KINDS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
         "reduce_scatter", "all_to_all_single", "all_to_all", "barrier", "gather", "scatter")
SLOW_NUMEL = 1 << 20  # the slow all_reduces' size: what tells them apart in the log
DUMP_APIS = ("_dump_nccl_trace", "_dump_fr_trace")  # pickles; the NCCL one first (torch's NCCL tests use it)


def issue(kind: str, dev, world: int, rank: int, async_op: bool):
    """Issue one collective of `kind` on 4-float tensors; its Work (async_op) or None."""
    def t(n: int = 4):
        return torch.ones(n, device=dev)

    calls = {
        "all_reduce": lambda: dist.all_reduce(t(), async_op=async_op),
        "broadcast": lambda: dist.broadcast(t(), src=0, async_op=async_op),
        "reduce": lambda: dist.reduce(t(), dst=0, async_op=async_op),
        "all_gather": lambda: dist.all_gather([t() for _ in range(world)], t(), async_op=async_op),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(t(4 * world), t(), async_op=async_op),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(t(), t(4 * world), async_op=async_op),
        "reduce_scatter": lambda: dist.reduce_scatter(t(), [t() for _ in range(world)], async_op=async_op),
        "all_to_all_single": lambda: dist.all_to_all_single(t(4 * world), t(4 * world), async_op=async_op),
        "all_to_all": lambda: dist.all_to_all([t() for _ in range(world)], [t() for _ in range(world)],
                                              async_op=async_op),
        "barrier": lambda: dist.barrier(async_op=async_op),
        "gather": lambda: dist.gather(t(), [t() for _ in range(world)] if rank == 0 else None, dst=0,
                                      async_op=async_op),
        "scatter": lambda: dist.scatter(t(), [t() for _ in range(world)] if rank == 0 else None, src=0,
                                        async_op=async_op),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # reduce_scatter_tensor's deprecation
        return calls[kind]()


def slow_all_reduce(dev, target_ms: float, async_op: bool) -> dict:
    """An all_reduce behind a GPU sleep of about `target_ms` on the current stream (the NCCL stream
    waits for it); the sleep's length measured with CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    end.synchronize()
    cycles = int(10_000_000 * target_ms / max(start.elapsed_time(end), 1e-3))
    x = torch.ones(SLOW_NUMEL, device=dev)
    torch.cuda.synchronize()
    enqueued_ns = time.monotonic_ns()  # the sleep cannot start before this
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    work = dist.all_reduce(x, async_op=async_op)
    if work is not None:
        work.wait()
    end.synchronize()
    torch.cuda.synchronize()
    return {"async": async_op, "gpu_delay_ms": start.elapsed_time(end), "sleep_enqueued_mono_ns": enqueued_ns,
            "numel": SLOW_NUMEL}


def dump_flight_recorder(out: str, rank: int) -> tuple[list[str], dict[str, str]]:
    """This rank's dump through every pickle API torch has (before destroy_process_group, which
    empties the recorder), named as torch names dumps: (the APIs that wrote one, {API: why not})."""
    c10d = torch._C._distributed_c10d
    wrote, failed = [], {}
    for api in DUMP_APIS:
        fn = getattr(c10d, api, None)
        if fn is None:
            failed[api] = "not in this torch"
            continue
        try:
            data = fn()
        except Exception as exc:  # noqa: BLE001 - said in the check's line
            failed[api] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        folder = os.path.join(out, f"fr-{api}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"comm_lib_trace_rank_{rank}"), "wb") as f:
            f.write(data)
        wrote.append(api)
    return wrote, failed


def sync(dev) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def kinds_job(args, dev) -> None:
    rank, world = dist.get_rank(), dist.get_world_size()
    issued = []
    for kind in KINDS:
        if kind in args.skip_kind:
            continue
        for async_op in (False, True):
            work = issue(kind, dev, world, rank, async_op)
            if async_op:
                work.wait()
            issued.append({"kind": kind, "async": async_op})
    slow = []
    if dev.type == "cuda":
        for async_op in (False, True):
            slow.append(slow_all_reduce(dev, args.sleep_ms, async_op))
            issued.append({"kind": "all_reduce", "async": async_op, "slow": True})
    sync(dev)
    time.sleep(1.0)  # a recorder that polls completions sees the last ones (the job's exit is not checked here)
    dumps, failed = dump_flight_recorder(args.out, rank)
    with open(os.path.join(args.out, "kinds.json"), "w") as f:
        json.dump({"issued": issued, "slow": slow, "dumps": dumps, "dumps_failed": failed,
                   "torch": torch.__version__}, f)


def loop_job(args, dev) -> None:
    x = torch.ones(16, device=dev)
    for _ in range(20):  # warm-up: first calls set up connections and caches
        dist.all_reduce(x)
    per_call = []
    for _ in range(args.reps):
        sync(dev)
        t0 = time.perf_counter_ns()
        for _ in range(args.calls):
            dist.all_reduce(x)
        sync(dev)
        per_call.append((time.perf_counter_ns() - t0) / args.calls / 1000)
    with open(os.path.join(args.out, "loop.json"), "w") as f:
        json.dump({"us_per_call": per_call, "calls": args.calls * args.reps + 20}, f)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("kinds", "loop"))
    p.add_argument("out")
    p.add_argument("--device", choices=("cuda", "cpu"), required=True)
    p.add_argument("--backend", choices=("nccl", "gloo"), required=True)
    p.add_argument("--skip-kind", action="append", default=[])
    p.add_argument("--sleep-ms", type=float, default=300.0)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group(args.backend, device_id=dev if args.backend == "nccl" else None)
    else:
        dev = torch.device("cpu")
        dist.init_process_group(args.backend)
    (kinds_job if args.mode == "kinds" else loop_job)(args, dev)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
