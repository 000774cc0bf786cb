"""Flight Recorder dumps of many ranks (collcheck/inputs/flight_recorder/: columns.py, summary.py,
parallel.py, convert.py): the columns of a usual dump are those entry_of checks, a converted log
ends with the checkpoint of the collectives it holds, ranks of one kind share a log and fold when
loaded, dumps are read in worker processes with the C unpickler (a worker that dies takes only
itself down: a dump that crashes it or exhausts its memory is one line and exit 2; workers keep
what they decode and a new pool takes over), and the conversion says what it is doing."""

from __future__ import annotations

import os
import pickle
import signal
import time

import pytest
from hypothesis import given, settings
from support import examples
from support.cli import run_cli
from support.fr_dumps import (
    FIELD_CHANGES,
    WORLD,
    dump,
    dumps_of_every_shape,
    entry,
    every_kind,
    write_dumps,
)

from collcheck.analysis.diff import analyse
from collcheck.base import progress
from collcheck.inputs.discover import discover
from collcheck.inputs.flight_recorder import convert as fr_convert
from collcheck.inputs.flight_recorder import load as fr_load
from collcheck.inputs.flight_recorder import parallel
from collcheck.inputs.flight_recorder.columns import Columns, usual_columns
from collcheck.inputs.flight_recorder.convert import SHARE_FROM, convert
from collcheck.inputs.flight_recorder.schema import check_entries, dump_head
from collcheck.inputs.flight_recorder.summary import summarize
from collcheck.logfile import format as lf
from collcheck.logfile.checkpoint import roll, signature
from collcheck.logfile.decode import Decoder, Tables
from collcheck.logfile.reader import LogError, LogStream
from collcheck.logfile.scan import scan_file
from collcheck.model import load_run


def _records(path: str):
    """(collectives, {seq_key: (count, rolling hash)} computed from the log's own C records, its
    last checkpoint)."""
    with open(path, "rb") as f:
        data = f.read()
    tables, sequences, n, checkpoint = Tables(), {}, 0, None
    for _at, rec, _eid in Decoder(LogStream(data, path), tables):
        if rec["k"] == lf.COLL:
            op = tables.strings[rec["o"]]
            key = tables.tspecs[rec["t"]] if "t" in rec else None
            k = lf.seq_key(rec["g"], op, rec.get("p"))
            count, h = sequences.get(k, (0, 0))
            sequences[k] = (count + 1, roll(h, signature(op, key, rec.get("r"), rec.get("p"), rec.get("tag", 0))))
            n += 1
        elif rec["k"] == lf.CHECKPOINT:
            checkpoint = rec
    return n, sequences, checkpoint


def _plain(rank: int) -> list:
    """One entry per collective, no P2P: the conversion's shortest way."""
    return [entry(i, "0", i + 1, op, [4 + i % 3]) for i, op in enumerate(["all_reduce", "broadcast", "barrier",
                                                                           "all_gather", "all_reduce"])]


def _gloo(rank: int) -> list:
    """gloo marks nothing completed: its counters (pg_status, below) count the first four, a
    member counted none of the last two: completion unknown."""
    return [entry(i, "0", i + 1, op, [4], state="scheduled", backend="gloo")
            for i, op in enumerate(["all_reduce", "broadcast", "all_reduce", "barrier", "all_reduce", "broadcast"])]


def _two_groups(rank: int) -> list:
    """Collectives of two groups interleaved, one coalesced; group 1 has no counters."""
    return [entry(0, "0", 1, "all_reduce", [4]), entry(1, "1", 1, "broadcast", [2]), entry(2, "1", 2, "all_reduce", [3]),
            entry(3, "1", 2, "all_reduce", [3]), entry(4, "0", 2, "barrier", [1]),
            entry(5, "1", 3, "all_gather", [5], state="scheduled")]


CASES = {"mixed": (every_kind, 8, [7], []), "plain": (_plain, 5, [], []), "gloo": (_gloo, 6, [4, 5], [4, 5]),
         "two groups": (_two_groups, 5, [4], [])}


@pytest.mark.parametrize("ranks", [2, SHARE_FROM])  # read here, and in worker processes
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_converted_log_ends_with_the_checkpoint_of_its_collectives(tmp_path, ranks, case):
    """Per group and P2P channel, the count and rolling hash its records give (what the recorder
    writes for the same collectives); the collectives not completed listed, those whose
    completion is unknown (gloo) after the checkpoint."""
    make, collectives, open_eids, unknown = CASES[case]
    dumps = {r: dump(make(r), {"0": list(range(ranks)), "1": list(range(ranks))}) for r in range(ranks)}
    for d in dumps.values():
        d["pg_status"] = {"0": {"last_enqueued_collective": 6, "last_started_collective": 4,
                                "last_completed_collective": 4 if case == "gloo" else 5}}
    d = write_dumps(tmp_path / "dumps", dumps)
    out = convert(discover(str(d)).found, cache=str(tmp_path / "cache"))
    for name in sorted(os.listdir(out)):
        path = os.path.join(out, name)
        n, sequences, cp = _records(path)
        assert cp is not None and cp["n"] == n == collectives, (name, cp)
        assert {k: (c, h) for k, c, h in cp["c"] if c} == sequences, name
        groups = {k >> 34 for k in sequences}  # a group of the log without a collective: counted 0
        assert {k for k, c, h in cp["c"] if not c and not h and not k & ((1 << 34) - 1)} == (
            set() if case == "two groups" else {1 << 34 if 0 in groups else 0}), cp["c"]
        scan = scan_file(path)
        assert list(cp.get("o", ())) == sorted(scan.pending | set(scan.unconfirmed)) == open_eids
        assert sorted(scan.unconfirmed) == unknown


def test_identical_ranks_share_one_log_and_fold(tmp_path):
    """Ranks whose dumps differ only in their times: one log converted in full, the others its
    bytes behind their own header; loaded, they share one set of columns, each under its rank."""
    ranks = len(WORLD["0"])
    collectives = [e for e in every_kind(0) if not e["is_p2p"]]
    dumps = {}
    for r in range(ranks):
        mine = [dict(e, time_created_ns=e["time_created_ns"] + 7 * r, thread_id=str(100 + r)) for e in collectives]
        dumps[r] = dump(mine[:-2] if r == 5 else mine, WORLD)  # rank 5 stopped two early: a kind of its own
    d = write_dumps(tmp_path / "dumps", dumps)
    out = convert(discover(str(d)).found, cache=str(tmp_path / "cache"), workers=2)
    sizes = {os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)}
    run = load_run(out)
    assert sorted(run.ranks) == list(range(ranks)) and all(log.header["rank"] == r for r, log in run.ranks.items())
    assert len({id(log.sig) for log in run.ranks.values()}) == 2 and len(sizes) <= 3  # (header lengths: 1 or 2 digits)
    assert [len(run.ranks[r]) for r in (0, 5)] == [6, 4]
    report = analyse(run)
    assert [(f.kind, f.position, f.ranks) for f in report.findings][:1] == [("missing", 4, [5])]


def test_ranks_of_different_groups_are_not_one_kind(tmp_path):
    """Two halves of the world, each with a group of its own issuing the same collectives: equal
    signatures, different groups. Each rank keeps its own group (one gid per group for the run)."""
    world = 2 * SHARE_FROM
    halves = {"1": list(range(SHARE_FROM)), "2": list(range(SHARE_FROM, world))}
    dumps = {}
    for r in range(world):
        mine = "1" if r < SHARE_FROM else "2"
        entries = [entry(0, "0", 1, "all_reduce", [4]), entry(1, mine, 1, "all_reduce", [4]),
                   entry(2, mine, 2, "broadcast", [2])]
        dumps[r] = dump(entries, {"0": list(range(world)), **halves})
    d = write_dumps(tmp_path / "dumps", dumps)
    run = load_run(convert(discover(str(d)).found, cache=str(tmp_path / "cache"), workers=2))
    assert len({id(log.sig) for log in run.ranks.values()}) == 2
    for r, log in run.ranks.items():
        assert sorted(g.name for g in log.groups) == ["0", "1" if r < SHARE_FROM else "2"], r
    assert analyse(run).findings == []


def test_a_hostile_dump_among_many_is_one_line_and_exit_2(tmp_path):
    """Read by the C unpickler in a worker: a dump that names a callable is refused there, and
    nothing of it runs."""
    class Boom:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'PWNED'}",))

    d = write_dumps(tmp_path / "dumps", {r: dump(every_kind(r), WORLD) for r in range(SHARE_FROM)})
    (d / f"comm_lib_trace_rank_{SHARE_FROM}").write_bytes(pickle.dumps({"version": "2.10", "entries": [Boom()]}))
    res = run_cli("diff", str(d), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.code == 2 and "refused to load posix.system" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert not (tmp_path / "PWNED").exists()


def _dies_on_3(item):
    if item == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # as the CPU-time limit ends a worker
    time.sleep(0.01)
    return ("worker", item, os.getpid())


def _here(item):
    return ("here", item, os.getpid())


@pytest.mark.parametrize("chunk", [1, 3])
def test_a_worker_that_dies_takes_only_itself_down(chunk):
    """The dumps in flight when a worker died (at most two tasks of `chunk` per worker) are read
    again here; the others in a new pool. Each dump once, whatever the chunks."""
    got = dict(parallel.run_all(_dies_on_3, list(range(30)), 2, _here, chunk))
    assert [got[i][1] for i in range(30)] == list(range(30))
    here = {i for i, v in got.items() if v[0] == "here"}
    assert 3 in here and len(here) <= parallel.IN_FLIGHT * 2 * chunk and got[29][0] == "worker", here
    assert all(v[2] == os.getpid() for i, v in got.items() if i in here)
    assert not any(v[2] == os.getpid() for i, v in got.items() if i not in here)


def test_chunks_are_a_few_dumps_and_every_worker_gets_many():
    assert parallel.chunk_size(10, 2) == 1 and parallel.chunk_size(1024, 2) == parallel.CHUNK_MOST
    assert parallel.chunk_size(200, 2) == 3 and parallel.chunk_size(5, 0) == 1


def _kept(item):
    parallel.keep([item] * 1000)
    return os.getpid(), len(parallel._kept)


def test_workers_keep_what_they_decode_and_a_new_pool_takes_over(monkeypatch):
    """A worker keeps what it decoded (its exit frees nothing) and reads no more than its pool's
    share: then a new pool's workers go on. Here nothing is kept."""
    monkeypatch.setattr(parallel, "PER_POOL", 2)
    monkeypatch.setattr(parallel, "KEEP_RSS", 1 << 40)  # (a worker forked from a big test process keeps too)
    got = dict(parallel.run_all(_kept, list(range(10)), 2, _here))
    assert sorted(got) == list(range(10)) and os.getpid() not in {pid for pid, _ in got.values()}
    assert {kept for _, kept in got.values()} <= set(range(1, 2 * 2 + 1))  # at most a pool's share each
    assert len({pid for pid, _ in got.values()}) >= 3  # 10 dumps, 4 a pool: 3 pools
    parallel.keep([1])
    assert parallel._kept is None


@pytest.mark.parametrize("case", range(5))
def test_columns_of_a_usual_dump_are_what_entry_of_gives(case):
    """The same values, the same budget taken, the same summary; an unusual dump takes nothing
    from the budget (it goes entry by entry)."""
    raw = pickle.loads(pickle.dumps(dumps_of_every_shape()[case], protocol=2))
    head, entries, budget = dump_head("rank_0", raw, 100_000)
    slow_head, _, slow_budget = dump_head("rank_0", raw, 100_000)
    check_entries("rank_0", slow_head, entries, slow_budget)
    slow = Columns.of_entries(slow_head["entries"])
    left = budget.left
    fast = usual_columns(entries, budget)
    if case >= 3:
        assert fast is None and budget.left == left
        return
    assert budget.left == slow_budget.left
    assert fast.values() == slow.values()
    assert summarize(0, "rank_0", head, fast) == summarize(0, "rank_0", slow_head, slow)


@settings(max_examples=examples(40), deadline=None)
@given(changes=FIELD_CHANGES)
def test_columns_are_taken_only_when_entry_of_takes_every_entry_alike(changes):
    """Fields replaced by values of any type: the columns are either refused (nothing taken from
    the budget) or exactly what entry_of gives, with no entry damaged and the same budget left."""
    raw = dump(every_kind(0), WORLD)
    for i, field, value in changes:
        raw["entries"][i][field] = value
    _, entries, budget = dump_head("rank_0", raw, 100_000)
    slow_head, _, slow_budget = dump_head("rank_0", raw, 100_000)
    try:
        check_entries("rank_0", slow_head, entries, slow_budget)
    except LogError:
        slow_head = None  # every entry damaged
    left = budget.left
    fast = usual_columns(entries, budget)
    if fast is None:
        assert budget.left == left
        return
    assert slow_head is not None and slow_head["damaged"] == 0 and budget.left == slow_budget.left
    assert fast.values() == Columns.of_entries(slow_head["entries"]).values()


def test_the_c_unpickler_builds_what_the_python_one_builds():
    for d in dumps_of_every_shape()[:3]:
        for protocol in (2, 4, 5):
            data = pickle.dumps(d, protocol=protocol)
            assert fr_load._unpickle(data, fast=True) == fr_load._unpickle(data, fast=False)


def test_the_conversion_says_what_it_does(tmp_path):
    """A display sees each step with its total, and one step forward per dump."""
    class Seen(progress.Progress):
        def __init__(self):
            self.steps = []

        def start(self, what, total):
            self.steps.append([what, total, 0])

        def advance(self, n=1):
            self.steps[-1][2] += n

    d = write_dumps(tmp_path / "dumps", {r: dump(every_kind(r), WORLD) for r in range(SHARE_FROM)})
    seen = Seen()
    previous = progress.use(seen)
    try:
        convert(discover(str(d)).found, cache=str(tmp_path / "cache"))
    finally:
        progress.use(previous)
    assert seen.steps == [["converting Flight Recorder dumps", SHARE_FROM, SHARE_FROM],
                          ["writing converted logs", SHARE_FROM, SHARE_FROM]]


def test_a_dump_changed_while_it_is_converted_is_one_line(tmp_path, monkeypatch):
    d = write_dumps(tmp_path / "dumps", {r: dump(every_kind(r), WORLD) for r in range(2)})
    real = fr_load.read_dump_bytes
    calls = []

    def changing(path, *args):
        calls.append(path)
        data = real(path, *args)
        return data + b" " if len(calls) > 2 else data  # after the conversion's hash (two reads)

    monkeypatch.setattr(fr_convert, "read_dump_bytes", changing)
    res = run_cli("diff", str(d), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.code == 2 and "changed while the Flight Recorder dumps were converted" in res.err, res.err


# -- what the C unpickler cannot be told to refuse: it ends its worker, the Python one refuses it ---


def _deep_key_pickle(depth: int = 400_000) -> bytes:
    """{"version": "2.10", "pg_status": {((((),),),...): None}}: a key nested `depth` deep (one
    byte a level, TUPLE1). Hashing it, as the C unpickler does to set it, recurses in C until the
    stack overflows (SIGSEGV): an 8 MiB stack (`_stack_8_mib`) holds 200,000 levels at most."""
    def item(value) -> bytes:
        return pickle.dumps(value, protocol=2)[2:-1]

    return (b"\x80\x02}(" + item("version") + item("2.10") + item("pg_status") + b"}" + b")" + b"\x85" * depth
            + b"Nsu.")


def _colliding_keys_pickle(n: int) -> bytes:
    """{"version": "2.10", "pg_status": {P: None, 2P: None, ...}}: n ints that differ by multiples
    of P = 2^61-1 hash alike, so that building the map takes n^2 steps (20,000: 6 s)."""
    p = (1 << 61) - 1
    keys = b"".join(pickle.dumps(i * p, protocol=2)[2:-1] + b"N" for i in range(1, n + 1))
    def item(value) -> bytes:
        return pickle.dumps(value, protocol=2)[2:-1]

    return b"\x80\x02}(" + item("version") + item("2.10") + item("pg_status") + b"}(" + keys + b"uu."


def _stack_8_mib() -> None:
    import resource

    hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    resource.setrlimit(resource.RLIMIT_STACK, (8 << 20 if hard == resource.RLIM_INFINITY else min(8 << 20, hard), hard))


def _cli_process(d, tmp_path, timeout: float = 60):
    """`python -m collcheck diff D` in a process of its own: what it writes to its stderr file,
    worker processes included (PYTHONFAULTHANDLER: a crashing worker would print its stack), with
    the usual 8 MiB stack."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, PYTHONPATH=root, XDG_CACHE_HOME=str(tmp_path / "cache"), COLLCHECK_FASTPATH="0",
               PYTHONFAULTHANDLER="1")
    return subprocess.run([sys.executable, "-m", "collcheck", "diff", str(d)], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False, preexec_fn=_stack_8_mib)


def _memo_bomb() -> bytes:
    """9 bytes: None put in the memo at index 2^31, for which the C unpickler reserves 16 GiB."""
    return b"\x80\x02Nr" + (1 << 31).to_bytes(4, "little") + b"."


@pytest.mark.parametrize("bomb, message", [
    (_deep_key_pickle, "refused a map key or set member that is tuple"),  # the worker dies: SIGSEGV
    (_memo_bomb, "too large to read"),  # a MemoryError under the worker's address-space limit
], ids=["stack", "memory"])
def test_a_dump_that_ends_its_worker_is_one_line_and_exit_2(tmp_path, bomb, message):
    """A worker dies (its stack overflows hashing a key nested a million deep, a real SIGSEGV):
    only that dump is read again, by the Python unpickler, which refuses the key; or a worker's
    memory runs out (a memo of 16 GiB), under its limit. The command says one line and exits 2:
    no traceback, no fault report of the worker, whatever the worker wrote to its stderr."""
    d = write_dumps(tmp_path / "dumps", {r: dump(every_kind(r), WORLD) for r in range(SHARE_FROM)})
    (d / f"comm_lib_trace_rank_{SHARE_FROM}").write_bytes(bomb())
    proc = _cli_process(d, tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "converting" not in ln]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and message in lines[0], proc.stderr[-3000:]
    assert f"comm_lib_trace_rank_{SHARE_FROM}" in lines[0]
    assert "Traceback" not in proc.stderr and "Fatal Python error" not in proc.stderr, proc.stderr[-3000:]


def test_the_deep_key_kills_the_c_unpickler_for_real():
    """The premise of the test above: the C unpickler, in a process of its own, dies of it."""
    import subprocess
    import sys

    code = "import io, pickle, sys; pickle.Unpickler(io.BytesIO(sys.stdin.buffer.read())).load()"
    proc = subprocess.run([sys.executable, "-c", code], input=_deep_key_pickle(), capture_output=True, timeout=60,
                          check=False, preexec_fn=_stack_8_mib)
    assert proc.returncode == -signal.SIGSEGV, proc


def test_keys_that_hash_alike_are_refused_before_the_map_is_built(tmp_path):
    """Read here (few dumps: the Python unpickler): the first key beyond 64 bits is refused, before
    20,000 of them would take seconds to set."""
    d = write_dumps(tmp_path / "dumps", {1: dump(every_kind(1), WORLD)})
    (d / "comm_lib_trace_rank_0").write_bytes(_colliding_keys_pickle(20_000))
    t0 = time.monotonic()
    res = run_cli("diff", str(d), env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.code == 2 and "refused a map key or set member that is a number beyond 64 bits" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert time.monotonic() - t0 < 5


@pytest.mark.slow  # the worker runs until its CPU-time limit (a few seconds)
def test_keys_that_hash_alike_end_their_worker_only(tmp_path):
    """Read by the C unpickler in a worker: building the map runs until the worker's CPU-time limit
    ends it; the Python unpickler then refuses the file's first such key."""
    d = write_dumps(tmp_path / "dumps", {r: dump(every_kind(r), WORLD) for r in range(SHARE_FROM)})
    (d / f"comm_lib_trace_rank_{SHARE_FROM}").write_bytes(_colliding_keys_pickle(40_000))
    proc = _cli_process(d, tmp_path, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "converting" not in ln]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert "number beyond 64 bits" in lines[0], lines
