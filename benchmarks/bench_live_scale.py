"""Live mode at scale, simulated: thousands of publishers against one TCPStore, rank 0's checker
polling them, and how soon an injected divergence is named.

    python benchmarks/bench_live_scale.py --publishers 1024,4096 [--processes 4] [--json]

No torch ranks: each simulated rank is live mode's own `Publisher` (capture/live/publisher.py),
with its own TCPStore connection as a rank's clone of the job's store, over a stand-in for the
recorder whose `LiveTables` (capture/live/tables.py) a driver advances as the recording path does:
all_reduces on the world group, `--rate` per second, the ranks in step; one rank issues another
shape at a known slot (collcheck.synth's shape_mismatch fault). In `--processes` processes a few
threads take the publishers' turns (one turn of Publisher.run's loop: the summary, the signal
counter and what it stands for; `--interval` s after the end of the last one, as run() waits).
This process serves the store and runs rank 0's `Checker` (capture/live/checker.py, unchanged);
at its suspicion every rank answers through the store (capture/live/share.py: the logs
collcheck.synth wrote with the same fault, each ended by the checkpoint the recorder writes at the
request): the first rank of each kind its whole log, the others its end; the checker gathers them
and hands them to the judge it starts (`python -m collcheck.cli.live`).
The finding must be the injected one (kind, slot, culprit), or the benchmark fails. Measured: the
checker's polls (time, CPU, bytes, requests), every key read idle in its batches and in one
request, each step from the slot's issue to the finding, each publish (CPU, wall) and each rank's
period between publishes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import heapq
import itertools
import json
import multiprocessing
import os
import random
import resource
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from collcheck.base.settings import Settings  # noqa: E402
from collcheck.capture.engine_python import PythonEngine  # noqa: E402
from collcheck.capture.live import publisher as live  # noqa: E402
from collcheck.capture.live.checker import KEYS_PER_REQUEST, Checker  # noqa: E402
from collcheck.capture.live.tables import RING, LiveTables, signature  # noqa: E402
from collcheck.logfile.format import seq_key  # noqa: E402
from collcheck.logfile.reader import read_header  # noqa: E402
from collcheck.logfile.tail import read_tail  # noqa: E402
from collcheck.synth import Fault, Op, Program, rank_events, write_run  # noqa: E402
from collcheck.synth.program import SUM  # noqa: E402

HOST = "127.0.0.1"
WORLD_GROUP = {"0": 0}  # group name -> gid, as the recorder numbers the default group
SEQ = seq_key(0, "allreduce_", None)
BODY = ((("float32", (4096,)),), (("float32", (1024,)),), (("bfloat16", (256, 4)),), (("float32", (1,)),))


# -- the program and its signatures ------------------------------------------------------------

def plan(world: int, slot: int, culprit: int, extra: int) -> tuple[Program, Fault]:
    """A training loop of all_reduces on the world group; `culprit` issues another shape at `slot`."""
    prog = Program(world, {"0": tuple(range(world))}, [], run_id="live-scale")
    sites = [prog.add_site() for _ in BODY]
    prog.ops = [Op("allreduce_", "0", BODY[j % len(BODY)], SUM, site=sites[j % len(BODY)])
                for j in range(slot + extra)]
    return prog, Fault("shape_mismatch", culprit, slot)


def signatures(prog: Program, fault: Fault) -> tuple[list[int], list[int]]:
    """(a clean rank's, the culprit's) live signatures per collective, from synth's own events (two
    ranks suffice: every clean rank issues the same), hashed as the recorder hashes a template."""
    pair = Program(2, {"0": (0, 1)}, prog.sites, prog.ops)
    events = rank_events(pair, [Fault(fault.kind, 1, fault.index)])
    return tuple([signature(e.op, tuple(e.tensors) or None, e.reduce_op, e.peer, e.tag) for e in events[r]]
                 for r in (0, 1))


# -- a simulated rank ------------------------------------------------------------------------------

class SimLog:
    """What live mode's answer to the checker (capture/live/share.py) reads of a LogWriter: the
    rank's log, which collcheck.synth wrote whole before the run, ending with the checkpoint the
    recorder writes at the request (Recorder.write_checkpoint: here read back, not written)."""

    def __init__(self, path: str):
        self.lock, self.path, self.closed, self.stopped, self.segment = threading.Lock(), path, False, None, 0
        self.header = read_header(path)
        self.checkpoint: dict | None = None

    def write(self) -> None:
        pass  # (nothing queued)

    def parts(self) -> list[tuple[str, int, int]]:
        return [(self.path, 0, os.path.getsize(self.path))]

    def colls_written(self) -> int:
        return self.checkpoint["n"]


class SimRank:
    """What the publisher reads of a Recorder (publisher.summary), over real LiveTables that
    `issue_until` advances as Recorder.emit does, under the writer lock; its log, what it sends
    when the checker asks for it."""

    def __init__(self, rank: int, world: int, sigs: list[int], slot: int, log: str):
        self.rank, self.sigs, self.slot = rank, sigs, slot
        self.writer = SimLog(log)
        self.active, self.failed, self.in_call = True, False, None
        self.live = LiveTables(PythonEngine())
        self.live.set_members(0, list(range(world)))
        self.issued = 0
        self.seqs: dict[int, int] = {}
        self.shown = 0  # collectives in the summary being published

    def issue_until(self, n: int) -> None:
        with self.writer.lock:
            for j in range(self.issued, n):
                self.live.mix(SEQ, j, self.sigs[j], 0, None)
            if n > self.issued:
                self.issued, self.seqs[SEQ] = n, n - 1

    def drain_completions(self) -> None:
        pass

    def write_checkpoint(self, why: str) -> dict:
        """The checkpoint at the end of the log synth wrote (the recorder writes one there now)."""
        if self.writer.checkpoint is None:
            self.writer.checkpoint = read_tail(self.writer.path).checkpoint
        return self.writer.checkpoint

    def inflight_items(self) -> list:
        return []

    def events_issued(self) -> int:
        return self.issued

    def live_state(self) -> dict:
        self.shown = self.issued
        return self.live.state(WORLD_GROUP, self.seqs)


class TimedPublisher(live.Publisher):
    """The real publisher; each publish timed (CPU of its thread, wall), and when the rank's first
    summary holding the slot was sent."""

    def __init__(self, *args):
        super().__init__(*args)
        self.cpu, self.wall, self.sent = [], [], []  # per publish: CPU s, wall s, when sent
        self.slot_sent: float | None = None

    def publish(self, rec, state=None) -> None:
        c, t = time.thread_time(), time.perf_counter()
        super().publish(rec, state)
        self.cpu.append(time.thread_time() - c)
        self.wall.append(time.perf_counter() - t)
        self.sent.append(time.time())
        if self.slot_sent is None and rec.shown > rec.slot:
            self.slot_sent = self.sent[-1]


TURN_THREADS = 4  # per process: each takes the turns of a share of its publishers


def turn(p: TimedPublisher, rec: SimRank) -> None:
    """One turn of Publisher.run's loop, its requests as they are: the summary, then what the
    checker set (the signal counter; the keys it stands for when it moved: the request for the
    logs, answered with the rank's log)."""
    p.publish(rec)
    p.react(rec)


def take_turns(pubs: list, sims: list, phases: list, interval: float, stop: threading.Event) -> None:
    """Publisher.run for many publishers on one thread (thousands of threads would measure Python's
    lock, not the store): each turn `interval` s after the end of that publisher's last, as run() waits."""
    due = [(phase, k) for k, phase in enumerate(phases)]
    heapq.heapify(due)
    while due:
        at, k = heapq.heappop(due)
        if stop.wait(max(0.0, at - time.monotonic())):
            return
        try:
            turn(pubs[k], sims[k])
        except Exception as exc:  # noqa: BLE001 - as run(): the store failed, live mode off
            live.turn_off(exc)
            return
        heapq.heappush(due, (time.monotonic() + interval, k))


def publishers(conn, port: int, ranks: list, world: int, sigs: tuple, culprit: int, slot: int,
               interval: float, rate: float, run_dir: str) -> None:
    """One process's (or thread's) share of the ranks: publish until told to stop, then send back
    the timings. Protocol on `conn`: -> "ready"; <- t0 (wall time of collective 0); <- "stop"; -> results."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < len(ranks) + 64:  # a connection each
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    from torch.distributed import TCPStore

    timeout = datetime.timedelta(seconds=live.STORE_TIMEOUT_S)
    sims = [SimRank(r, world, sigs[r == culprit], slot, os.path.join(run_dir, f"rank-{r:05d}.0.msgpack"))
            for r in ranks]
    pubs = [TimedPublisher(lambda s=s: s, TCPStore(HOST, port, None, False, timeout=timeout), s.rank, interval)
            for s in sims]
    begin, stop = time.monotonic(), threading.Event()
    phases = [begin + i * interval / len(pubs) for i in range(len(pubs))]  # as ranks' logs open at various times
    threads = [threading.Thread(target=take_turns, args=(pubs[t::TURN_THREADS], sims[t::TURN_THREADS],
                                                         phases[t::TURN_THREADS], interval, stop))
               for t in range(min(TURN_THREADS, len(pubs)))]
    for t in threads:
        t.start()
    conn.send("ready")
    t0 = conn.recv()
    issued = drive(sims, t0, rate, conn)
    stop.set()
    for t in threads:
        t.join()
    conn.send({"issued": issued, "off": live.OFF.is_set(), "slot_sent": {p.rank: p.slot_sent for p in pubs},
               "publishes": [(p.sent, p.cpu, p.wall) for p in pubs]})


def drive(sims: list[SimRank], t0: float, rate: float, conn) -> float | None:
    """The recording path: collective j is issued by every rank at t0 + j / rate, until "stop".
    Returns when these ranks had all issued the slot (wall time)."""
    n, total, issued = 0, len(sims[0].sigs), None
    slot = sims[0].slot
    while True:
        due = min(total, int((time.time() - t0) * rate) + 1) if time.time() >= t0 else 0
        if due > n:
            for s in sims:
                s.issue_until(due)
            if n <= slot < due:
                issued = time.time()
            n = due
        wait = t0 + n / rate - time.time() if n < total else 0.5
        if conn.poll(max(0.0, wait)):
            conn.recv()
            return issued


# -- rank 0's checker, timed -------------------------------------------------------------------------

class CountingStore:
    """The checker's store, counting the requests it makes and the bytes of values it reads."""

    def __init__(self, store):
        self.store, self.requests, self.bytes_read = store, 0, 0

    def check(self, keys):
        self.requests += 1
        return self.store.check(keys)

    def multi_get(self, keys):
        self.requests += 1
        values = self.store.multi_get(keys)
        self.bytes_read += sum(len(v) for v in values)
        return values

    def set(self, key, value):
        self.requests += 1
        self.store.set(key, value)

    def __getattr__(self, name):  # add, get, delete_key: the request for the logs, their answers
        method = getattr(self.store, name)

        def counted(*args):
            self.requests += 1
            return method(*args)
        return counted


class TimedChecker(Checker):
    """The real checker; each poll (read the summaries, run the detector) timed, the suspicions and
    the judge's answers kept with their wall times."""

    def __init__(self, *args):
        super().__init__(*args)
        self.polls: list[dict] = []
        self.asked: list[tuple] = []  # (suspected at, suspicion, answered at, finding)
        self.gathered: list[float] = []  # s each request for the ranks' logs took (gather.py)
        update = self.detector.update

        def timed_update(now, summaries):
            c, t = time.thread_time(), time.perf_counter()
            found = update(now, summaries)
            self.polls[-1]["detect_s"] = time.perf_counter() - t
            self.polls[-1]["cpu_s"] += time.thread_time() - c
            return found

        self.detector.update = timed_update

    def read(self) -> dict[int, dict]:
        b, q = self.store.bytes_read, self.store.requests
        c, t = time.thread_time(), time.perf_counter()
        out = super().read()
        self.polls.append({"at": time.time(), "read_s": time.perf_counter() - t, "cpu_s": time.thread_time() - c,
                           "detect_s": 0.0, "bytes": self.store.bytes_read - b, "requests": self.store.requests - q,
                           "ranks": len(out)})
        return out

    def snapshot(self):
        t = time.perf_counter()
        snap = super().snapshot()
        self.gathered.append(time.perf_counter() - t)
        if snap.notes:
            raise AssertionError(f"logs missing from the snapshot: {snap.notes[:3]}")
        return snap

    def ask(self, suspicion):
        at = time.time()
        found = super().ask(suspicion)
        self.asked.append((at, suspicion, time.time(), found))
        return found


# -- one size ----------------------------------------------------------------------------------------

def start_publishers(port: int, world: int, processes: int, args: tuple) -> tuple[list, list]:
    """The ranks dealt round-robin to `processes` processes (0: threads of this process)."""
    ctx = multiprocessing.get_context("spawn")
    conns, workers = [], []
    for share in range(max(processes, 1)):
        here, there = ctx.Pipe() if processes else multiprocessing.Pipe()
        ranks = list(range(share, world, max(processes, 1)))
        kind = ctx.Process if processes else threading.Thread
        worker = kind(target=publishers, args=(there, port, ranks, world, *args), daemon=True)
        worker.start()
        conns.append(here)
        workers.append(worker)
    return conns, workers


def receive(conn, timeout: float):
    if not conn.poll(timeout):
        raise TimeoutError(f"no answer from the publishers within {timeout:.0f} s")
    return conn.recv()


def simulate(world: int, processes: int = 4, interval: float = 0.5, rate: float = 20.0, steady_s: float = 12.0,
             seed: int = 0, idle_reads: int = 5, timeout_s: float = 300.0) -> dict:
    """One size: the run, the judge's finding checked against the injected fault, the figures."""
    rng = random.Random(seed)
    culprit, slot = rng.randrange(world), max(1, round(steady_s * rate))
    prog, fault = plan(world, slot, culprit, RING)  # (a window past the slot: the logs the judge reads too)
    expected = tuple(fault.expect(prog))
    was_off = live.OFF.is_set()
    with tempfile.TemporaryDirectory(prefix="collcheck-live-scale-") as run_dir:
        started = time.perf_counter()
        write_run(run_dir, prog, [fault], done=True, trailer=False, checkpoint="share")  # the running job's logs
        logs_s = time.perf_counter() - started
        job = Job(world, min(processes, world), interval, rate, run_dir, timeout_s)
        job.run(signatures(prog, fault), culprit, slot, steady_s, idle_reads)
        report_path = os.path.join(run_dir, "live-report.json")
        first = None
        if os.path.exists(report_path):
            with open(report_path) as f:
                first = json.load(f)["live"]["first"]
    if live.OFF.is_set() and not was_off:
        live.OFF.clear()
        raise RuntimeError("live mode turned itself off in the checker (a store error: see the warning)")
    if any(r["off"] for r in job.results):
        raise RuntimeError("live mode turned itself off in a publisher process (a store error)")
    found = None if first is None else (first["kind"], first["group"], first["position"], first["ranks"])
    if found != expected:
        raise AssertionError(f"the judge named {found}, the injected fault is {expected}; "
                             f"suspicions: {[(s.kind, s.group, s.position) for _, s, _, _ in job.checker.asked]}")
    return {"processes": job.processes, "culprit": culprit, "found": list(found), "logs_write_s": round(logs_s, 2),
            **figures(job, slot, culprit)}


class Job:
    """One simulated job: the store, the publishers, rank 0's checker; what they measured."""

    def __init__(self, world: int, processes: int, interval: float, rate: float, run_dir: str, timeout_s: float):
        self.world, self.processes, self.interval, self.rate = world, processes, interval, rate
        self.run_dir, self.timeout_s = run_dir, timeout_s
        self.settings = Settings(live_interval=interval)

    def run(self, sigs: tuple, culprit: int, slot: int, steady_s: float, idle_reads: int) -> None:
        from torch.distributed import TCPStore

        timeout = datetime.timedelta(seconds=live.STORE_TIMEOUT_S)
        server = TCPStore(HOST, 0, None, True, wait_for_workers=False, timeout=timeout)
        conns, workers = start_publishers(server.port, self.world, self.processes,
                                          (sigs, culprit, slot, self.interval, self.rate, self.run_dir))
        for c in conns:
            assert receive(c, self.timeout_s) == "ready"
        client = TCPStore(HOST, server.port, None, False, timeout=timeout)
        self.checker = TimedChecker(CountingStore(client), self.world, self.run_dir, 0, self.settings)
        self.t0 = time.time() + 0.2
        for c in conns:
            c.send(self.t0)
        self.checker.start()
        self.checker.join(steady_s + self.timeout_s)
        if self.checker.is_alive():
            self.checker.closing.set()
            self.checker.join()
        for c in conns:
            c.send("stop")
        self.results = [receive(c, self.timeout_s) for c in conns]
        for w in workers:
            w.join(self.timeout_s)
        # the publishers have stopped: every key read in the checker's batches, and in one request
        self.reads = {n: read_keys(client, self.checker.keys, n, idle_reads) for n in (KEYS_PER_REQUEST, self.world)}


def read_keys(store, keys: list, per_request: int, times: int) -> float:
    """Median s of reading every key, `per_request` keys a multi_get (the checker: KEYS_PER_REQUEST)."""
    spent = []
    for _ in range(times):
        started = time.perf_counter()
        for i in range(0, len(keys), per_request):
            store.multi_get(keys[i:i + per_request])
        spent.append(time.perf_counter() - started)
    return statistics.median(spent)


def spread(xs: list, scale: float = 1.0) -> list[float]:
    """[median, p99, max] of xs, times scale."""
    xs = sorted(xs)
    return [statistics.median(xs) * scale, xs[min(len(xs) - 1, int(0.99 * len(xs)))] * scale, xs[-1] * scale]


def figures(job: Job, slot: int, culprit: int) -> dict:
    """One size's figures: s from every rank's issue of the slot to each step; the checker's polls
    once every summary holds a full window; the publishers' turns before the suspicion."""
    steady = job.t0 + RING / job.rate + job.interval
    polls = [p for p in job.checker.polls[1:] if p["ranks"] == job.world and p["at"] >= steady]
    if not polls:
        raise RuntimeError("no poll once every summary held a full window: a longer --steady")
    suspected, suspicion, named, _ = job.checker.asked[-1]
    if len(job.checker.asked) != 1 or (suspicion.kind, suspicion.position) != ("divergence", slot):
        raise AssertionError(f"suspicions: {[(s.kind, s.group, s.position) for _, s, _, _ in job.checker.asked]}")
    sent = {r: t for res in job.results for r, t in res["slot_sent"].items()}
    if None in sent.values():
        raise RuntimeError("a rank never published the slot: the publishers fell behind")
    issued = max(r["issued"] for r in job.results)
    mine = [[(t, c, w) for t, c, w in zip(*p) if t < suspected] for res in job.results for p in res["publishes"]]
    first = job.checker.polls[0]
    return {
        "publishers": job.world, "interval_s": job.interval, "rate": job.rate, "slot": slot, "polls": len(polls),
        "poll_ms": spread([p["read_s"] + p["detect_s"] for p in polls], 1e3),
        "poll_read_ms": statistics.median(p["read_s"] for p in polls) * 1e3,
        "poll_detect_ms": statistics.median(p["detect_s"] for p in polls) * 1e3,
        "poll_cpu_ms": statistics.median(p["cpu_s"] for p in polls) * 1e3,
        "poll_bytes": statistics.median(p["bytes"] for p in polls), "poll_requests": polls[-1]["requests"],
        "first_poll_ms": (first["read_s"] + first["detect_s"]) * 1e3, "first_poll_requests": first["requests"],
        "read_batched_ms": job.reads[KEYS_PER_REQUEST] * 1e3, "read_one_request_ms": job.reads[job.world] * 1e3,
        "culprit_sent_s": sent[culprit] - issued, "last_sent_s": max(sent.values()) - issued,
        "suspected_s": suspected - issued, "named_s": named - issued,
        "logs_s": job.checker.gathered[-1], "judge_s": named - suspected - job.checker.gathered[-1],
        "publishes": sum(len(p) for p in mine), "publish_cpu_us": spread([c for p in mine for _, c, _ in p], 1e6),
        "publish_wall_ms": spread([w for p in mine for _, _, w in p], 1e3),
        "period_s": spread([b[0] - a[0] for p in mine for a, b in itertools.pairwise(p)]),
    }


# -- the table -----------------------------------------------------------------------------------------

def _three(xs: list, digits: int) -> str:
    return " / ".join(f"{x:.{digits}f}" for x in xs)


ROWS = (  # (label, the cell from a size's figures)
    ("named (as injected)", lambda r: f"{r['found'][0]} #{r['found'][2]}, rank {r['found'][3][0]}"),
    ("checker poll, ms: median / p99 / max", lambda r: _three(r["poll_ms"], 1)),
    ("  reading the store / the detector, median ms", lambda r: _three([r["poll_read_ms"], r["poll_detect_ms"]], 1)),
    ("  CPU, median ms", lambda r: f"{r['poll_cpu_ms']:.1f}"),
    ("  summaries read, bytes", lambda r: f"{r['poll_bytes']:,.0f}"),
    ("  store requests", lambda r: f"{r['poll_requests']}"),
    ("first poll (finds every key): ms, requests", lambda r: f"{r['first_poll_ms']:.1f}, {r['first_poll_requests']}"),
    ("every key, idle: 512 a request / all in one, ms",
     lambda r: _three([r["read_batched_ms"], r["read_one_request_ms"]], 1)),
    ("s after every rank issued the slot: culprit's summary", lambda r: f"{r['culprit_sent_s']:.2f}"),
    ("  the last rank's summary", lambda r: f"{r['last_sent_s']:.2f}"),
    ("  the checker's suspicion", lambda r: f"{r['suspected_s']:.2f}"),
    ("  the judge's finding", lambda r: f"{r['named_s']:.2f}"),
    ("  of which the logs through the store (whole, or their ends)", lambda r: f"{r['logs_s']:.2f}"),
    ("  of which the judge (analysis process)", lambda r: f"{r['judge_s']:.2f}"),
    ("publishes before the suspicion", lambda r: f"{r['publishes']:,}"),
    ("  CPU µs: median / p99 / max", lambda r: _three(r["publish_cpu_us"], 0)),
    ("  wall ms: median / p99 / max", lambda r: _three(r["publish_wall_ms"], 2)),
    ("  a rank's period, s: median / p99 / max", lambda r: _three(r["period_s"], 3)),
)


def print_table(rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="live mode, simulated ranks against one TCPStore")
    table.add_column("", no_wrap=True)
    for r in rows:
        table.add_column(f"{r['publishers']:,} publishers", justify="right", no_wrap=True)
    for label, value in ROWS:
        table.add_row(label, *(value(r) for r in rows))
    console = Console()
    (console if console.is_terminal else Console(width=160)).print(table)


@contextlib.contextmanager
def judge_output_dropped():
    """Not the judge's report on this process's stderr (its "s after it was issued" reads synth's clock)."""
    saved = os.dup(2)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def sizes(text: str) -> list[int]:
    values = [int(x) for x in text.split(",")]
    if min(values) < 2:
        raise ValueError(text)
    return values


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python benchmarks/bench_live_scale.py", description=__doc__.split("\n")[0])
    p.add_argument("--publishers", type=sizes, default="1024,4096", help="simulated ranks, comma-separated sizes")
    p.add_argument("--processes", type=int, default=4, help="processes the publisher threads run in")
    p.add_argument("--interval", type=float, default=0.5, help="COLLCHECK_LIVE_INTERVAL: s between summaries and polls")
    p.add_argument("--rate", type=float, default=20.0, help="collectives per second each rank issues")
    p.add_argument("--steady", type=float, default=12.0, help="s of publishing before the divergent collective")
    p.add_argument("--seed", type=int, default=0, help="picks the culprit rank")
    p.add_argument("--json", action="store_true", help="one JSON object per size instead of the table")
    args = p.parse_args(argv)
    # torch's store names each connection's peer (a reverse lookup); a resolver that drops a query
    # stalls that connection 5 s. One short timeout instead, after which torch stops asking.
    os.environ.setdefault("RES_OPTIONS", "timeout:1 attempts:1")
    rows = []
    for world in args.publishers:
        with judge_output_dropped():
            row = simulate(world, args.processes, args.interval, args.rate, args.steady, args.seed)
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
    if not args.json:
        print(f"collcheck bench_live_scale: {args.rate:g} collectives/s per rank, summaries and polls every "
              f"{args.interval:g} s, publishers in {args.processes} processes, {os.cpu_count()} CPUs")
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
