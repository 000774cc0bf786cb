"""collcheck's own logs (format 2) are data from another machine (collcheck/logfile/records.py, logfile/reader.py,
logfile/frames.py, logfile/scan.py): every key of every record kind with a value of another type or out of
range, nesting 1,000 deep, headers that claim impossible worlds, files that are not regular
files, files too large to read, and bytes that made resynchronisation quadratic. Each ends in a
report (the record left out, said like damage) or one line and exit 2: never exit 3, a traceback
or a hang.

The cases that would hang or exhaust memory without their guard run in one child process under
an address-space limit and a timeout (a read of /dev/zero or a loop inside C answers no signal)."""

from __future__ import annotations

import ast
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples
from support.logbytes import frames_of, pack
from support.cli import run_cli
from support.deadline import deadline

from collcheck.logfile import format as lf, records
from collcheck.logfile.writer import LogWriter
from collcheck.model import load_run
from collcheck.logfile.reader import MAX_LOG_BYTES, LogStream
from collcheck.logfile.scan import scan_bytes

ROOT = str(Path(__file__).resolve().parents[3])
FILE = "/job/train.py"
WORLD = 2
DEEP = 1000  # nesting of the deep value (msgpack's decoder takes up to 1024)


# -- a small log with every record kind, written by the recorder's LogWriter -------------------------


def _write_rank(path: str, rank: int) -> None:
    """Every kind the reader knows: header, strings, sites, a chain, tensor specs, threads, groups,
    collectives with every optional key (completions riding along), errors, watchdog stacks, an
    exception, the recorder disabled, counters, a skipped call, a sync point, steps, a call site's
    file, a receive's sender, the trailer."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    w = LogWriter(fd, path)
    with w.lock:
        w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "collcheck": "0", "torch": "2",
                 "python": "3", "backend": "cpu:gloo", "rank": rank, "world": WORLD, "run": "untrusted",
                 "launch": "l", "restart": 0, "host": "elsewhere", "cpus": 4, "threads": 2, "pid": 4242,
                 "argv": [FILE], "wall_ns": 1_700_000_000_000_000_000, "mono_ns": 0, "stack": "full",
                 "hang_s": 60.0})
        site, other = w.site_id(FILE, 10, "main"), w.site_id(FILE, 20, "step")
        chain = w.chain_id((other, site))
        vec, mat = w.tspec_id((("float32", (8,)),)), w.tspec_id((("float32", (4, 2)),))
        w.keep({"k": lf.THREAD, "h": 0, "n": "MainThread", "id": 1})
        w.keep({"k": lf.THREAD, "h": 1, "n": "worker", "id": 2})
        for gid, name, desc in ((0, "0", "default_pg"), (1, "1", "mesh_dp")):
            w.keep({"k": lf.GROUP, "op": "seen", "gid": gid, "g": name, "d": desc, "r": [0, 1]})
            w.keep({"k": lf.GROUP, "op": "init" if gid == 0 else "new", "gid": gid, "g": name, "d": desc,
                    "r": [0, 1], "s": site, "ts": gid, "m": True, "us": 30})
        w.write()
        s = w.string_id
        colls = [
            {"o": s("allreduce_"), "g": 0, "t": vec, "r": 0, "s": site, "ch": chain, "st": [other, site], "h": 0,
             "u": s("gradient bucket"), "l": s("DDP backward 0"), "x": s("all_reduce"), "q": 1, "qi": 0, "a": 1,
             "n": 1, "tag": 3},
            {"o": s("broadcast_"), "g": 1, "t": vec, "p": 0, "s": other, "h": 1},
            {"o": s("alltoall_base_"), "g": 0, "t": mat, "s": other, "sp": [[2, 2], [2, 2]]},
            {"o": s("send" if rank == 0 else "recv_"), "g": 0, "t": vec, "p": 1 - rank, "s": site, "tag": 0},
            {"o": s("barrier"), "g": 1, "s": site},
        ]
        for eid, rec in enumerate(colls):
            w.write({"k": lf.COLL, **rec, "ts": 100 * (eid + 1), "j": eid}, eid)
            if eid < 2:
                w.done(eid, 100 * (eid + 1) + 5, 100 * (eid + 1) + 40 if eid else None)
        w.queue({"k": lf.DONE, "i": 2, "r": 350, "c": 360})
        w.queue({"k": lf.DONE, "i": 3, "r": 450, "e": "RuntimeError: peer lost"})
        for rec in ({"k": lf.STEP, "ts": 460, "o": 1}, {"k": lf.SYNC, "ts": 470, "s": site, "i": 3, "w": "item()"},
                    {"k": lf.FILE, "f": s(FILE), "s": 1234, "m": 1_700_000_000_000_000_000, "h": "00ff" * 8},
                    {"k": lf.SOURCE, "i": 3, "p": 1 - rank},
                    {"k": lf.NON_MEMBER, "x": s("all_reduce"), "s": site, "h": 0, "ts": 480},
                    {"k": lf.STACKS, "i": 4, "op": "barrier", "waited_s": 1.5, "ts": 490,
                     "threads": [{"id": 2, "n": "worker", "f": [[FILE, 10, "main"], [FILE, 20, "step"]]}]},
                    {"k": lf.GROUP, "op": "destroy", "s": site, "ts": 495, "all": True},
                    {"k": lf.DISABLED, "m": "could not write the log: No space left on device", "e": "ENOSPC",
                     "ts": 496},
                    {"k": lf.EXCEPTION, "t": "RuntimeError", "m": "boom", "ts": 498, "s": other},
                    {"k": lf.COUNTERS, "c": [[0, 1], [1 << 34, 1]]}, {"k": lf.API, "i": 1},
                    {"k": lf.CHECKPOINT, "n": 5, "c": [[0, 5, 2 ** 64 - 1]], "w": "end", "o": [4], "x": [3]}):
            w.queue(rec)
        w.write({"k": lf.TRAILER, "ts": 500, "wall_ns": 1_700_000_000_000_500_000})
    w.close()


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> list[bytes]:
    """Each rank's log, as the writer wrote it."""
    d = tmp_path_factory.mktemp("base")
    out = []
    for rank in range(WORLD):
        path = str(d / f"rank-{rank:05d}.0.msgpack")
        _write_rank(path, rank)
        out.append(Path(path).read_bytes())
    return out


def run_dir(tmp_path: Path, logs: list[bytes]) -> Path:
    d = tmp_path / "run"
    d.mkdir(exist_ok=True)
    for rank, data in enumerate(logs):
        (d / f"rank-{rank:05d}.0.msgpack").write_bytes(data)
    return d


def targets(data: bytes) -> list[tuple[int, int, str]]:
    """(frame, record, key) of every key but `k` of every record of a log."""
    return [(f, r, key) for f, (recs, _) in enumerate(frames_of(data)) for r, rec in enumerate(recs)
            for key in rec if key != "k"]


def changed(data: bytes, frame: int, record: int, key: str, value) -> bytes:
    frames = frames_of(data)
    frames[frame][0][record][key] = value
    return pack(frames)


COMMANDS = [("diff", "--format", "text"), ("diff", "--format", "json"), ("diff", "--format", "junit"),
            ("diff", "--format", "github"), ("stats",), ("stats", "--format", "json"), ("show",),
            ("export", "--format", "perfetto", "-o")]


def run_all(d: Path, commands=COMMANDS) -> list:
    """Each command on the run (show: on rank 0's log): [(command, exit code, stderr)] of those
    that ended other than in 0, 1, 2 or 4, or with a traceback."""
    bad = []
    for cmd in commands:
        args = list(cmd) + ([str(d.parent / "trace.json")] if cmd[0] == "export" else [])
        target = d / "rank-00000.0.msgpack" if cmd[0] == "show" else d
        res = run_cli(*args, str(target))
        if res.code not in (0, 1, 2, 4) or "Traceback" in res.err:
            bad.append((cmd, res.code, res.err[-500:]))
    return bad


def one_line_error(res, text: str) -> None:
    assert res.code == 2, (res.code, res.err[-2000:])
    assert text in res.err and len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err, res.err


# -- the base log reads as written -------------------------------------------------------------------


def test_the_base_log_has_every_kind_and_reads_clean(base, tmp_path):
    kinds = {rec["k"] for recs, _ in frames_of(base[0]) for rec in recs}
    assert kinds == set(lf.ALL_KINDS)
    assert all(records.problem(rec) is None for recs, _ in frames_of(base[0]) for rec in recs if rec["k"] != "C")
    run = load_run(str(run_dir(tmp_path, base)))
    assert len(run.ranks[0]) == 5 and not run.ranks[0].damage and not run.ranks[0].lost
    assert run_all(run_dir(tmp_path, base)) == []


# -- wrong types, out of range -----------------------------------------------------------------------

WRONG = [None, "x\x1b[31m", 1.5, math.nan, [1, "a"], {"a": 1}, b"\x00", -1, 2**64 - 1, True]


def _wrong_types(base, tmp_path, kind: str, every: bool) -> None:
    """Every key of every record of the kind with a value of another type (each of WRONG, or one
    per key): the record is left out as damage and said, or its value was one the schema takes
    (a bool for an int); never exit 3."""
    frames = frames_of(base[0])
    bad = []
    for n, (f, r, key) in enumerate(targets(base[0])):
        rec = frames[f][0][r]
        if rec["k"] != kind:
            continue
        for value in WRONG if every else [WRONG[n % len(WRONG)]]:
            d = run_dir(tmp_path, [changed(base[0], f, r, key, value), base[1]])
            res = run_cli("diff", str(d), "--format", "json")
            if res.code not in (0, 1, 2, 4) or "Traceback" in res.err:
                bad.append((key, value, res.code, res.err[-300:]))
            elif records.problem(dict(rec, **{key: value}), WORLD) is not None:
                warnings = json.loads(res.out)["warnings"]
                assert any("damaged" in w or "unreadable" in w for w in warnings), (key, value, warnings)
    assert bad == []


@pytest.mark.parametrize("kind", sorted(lf.ALL_KINDS - {lf.HEADER}))
def test_a_record_of_the_wrong_types_is_left_out_and_said(base, tmp_path, kind):
    _wrong_types(base, tmp_path, kind, every=False)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(lf.ALL_KINDS - {lf.HEADER}))
def test_a_record_of_the_wrong_types_is_left_out_and_said_every_type(base, tmp_path, kind):
    _wrong_types(base, tmp_path, kind, every=True)


@pytest.mark.parametrize("key, value, said", [
    ("world", 10**12, "impossible rank/world"),
    ("world", 2**64 - 1, "impossible rank/world"),
    ("rank", 5, "impossible rank/world"),
    ("rank", -1, "impossible rank/world"),
    ("world", "2", "impossible rank/world"),
    ("v", "2", "newer than"),
    ("pid", 2**63, "malformed header"),
    ("hang_s", math.inf, "malformed header"),
    ("argv", [[["deep"]]], "malformed header"),
])
def test_a_header_out_of_range_is_one_line_and_exit_2(base, tmp_path, key, value, said):
    d = run_dir(tmp_path, [changed(base[0], 0, 0, key, value), base[1]])
    started = time.monotonic()
    one_line_error(run_cli("diff", str(d)), said)
    assert time.monotonic() - started < 5  # (a world of 10**12 is refused before anything is allocated)


def test_a_line_number_of_two_billion_is_damage(base, tmp_path):
    f, r = next((f, r) for f, r, key in targets(base[0]) if key == "l" and frames_of(base[0])[f][0][r]["k"] == "F")
    d = run_dir(tmp_path, [changed(base[0], f, r, "l", 2 * 10**9), base[1]])
    res = run_cli("diff", str(d), "--format", "json")
    assert res.code in (0, 1, 4), res.err
    assert any("'l' is not an integer in 0..10000000" in w for w in json.loads(res.out)["warnings"])


def _nested(depth: int) -> bytes:
    return b"\x91" * depth + b"\x01"


@pytest.mark.parametrize("kind, key", [("C", "ts"), ("C", "d"), ("C", "sp"), ("C", "st"), ("C", "unknown"),
                                       ("W", "threads"), ("G", "r"), ("V", "t"), ("H", "argv"), ("H", "unknown")])
def test_nesting_a_thousand_deep(base, tmp_path, kind, key):
    """msgpack decodes it (its limit is 1,024); nothing after the reader may recurse into it."""
    frames = frames_of(base[0])
    f, r = next((f, r) for f, (recs, _) in enumerate(frames) for r, rec in enumerate(recs) if rec["k"] == kind)
    rec = dict(frames[f][0][r])
    rec.pop(key, None)
    head = bytearray(msgpack.packb(rec))
    if head[0] == 0xDE:  # map 16
        head[1:3] = (int.from_bytes(head[1:3], "big") + 1).to_bytes(2, "big")
    else:
        assert 0x80 <= head[0] < 0x8F
        head[0] += 1  # one more key in the fixmap: `key`, whose value is the nested array
    payloads = [msgpack.packb(x) for x in frames[f][0]]
    payloads[r] = bytes(head) + msgpack.packb(key) + _nested(DEEP)
    data = b"".join(pack([fr_]) if i != f else lf.frame(b"".join(payloads), frames[f][1])
                    for i, fr_ in enumerate(frames))
    assert run_all(run_dir(tmp_path, [data, base[1]])) == []


# -- files that are not regular files, or too large ----------------------------------------------------


def test_a_fifo_among_the_logs_is_refused_without_blocking(base, tmp_path):
    d = run_dir(tmp_path, base[:1])
    os.mkfifo(d / "rank-00001.0.msgpack")
    with deadline(10):
        res = run_cli("diff", str(d))
    one_line_error(res, "FIFO")
    with deadline(10):  # a FIFO named as a later segment of a log
        os.unlink(d / "rank-00001.0.msgpack")
        (d / "rank-00001.0.msgpack").write_bytes(base[1])
        os.mkfifo(d / "rank-00001.0.msgpack.1")
        res = run_cli("diff", str(d))
    one_line_error(res, "FIFO")


def test_a_fifo_beside_a_log_as_its_stack_dump_is_ignored(base, tmp_path):
    d = run_dir(tmp_path, base)
    os.mkfifo(d / "rank-00001.0.sigterm.txt")
    with deadline(10):
        res = run_cli("diff", str(d))
    assert res.code in (0, 1, 4), res.err


# -- resource bombs: one child process, under a memory limit and a timeout -----------------------------

BOMBS = ["dev_zero", "sparse", "marks", "world"]
CHILD = r"""
import json, os, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from support.cli import run_cli
for name, target in json.loads(sys.argv[1]):
    started = time.monotonic()
    try:
        res = run_cli("diff", target)
        out = {"code": res.code, "err": res.err[-400:]}
    except BaseException as exc:
        out = {"code": None, "err": repr(exc)[:400]}
    out["s"] = time.monotonic() - started
    print(json.dumps([name, out]), flush=True)
"""


def _marks(size: int) -> bytes:
    """A frame mark every 9 bytes, each claiming a frame that runs to near the end of the data (a
    CRC over each was quadratic: 1 MB took minutes)."""
    out = bytearray()
    while len(out) < size - 16:
        length = size - len(out) - 16
        out += bytes((lf.FRAME_MARK,)) + b"\x11\x22\x33\x44" + lf.uvarint(length)[:3].ljust(3, b"\x80") + b"\x01"
    return bytes(out)


def _bombs(tmp_path: Path, base: list[bytes]) -> list[tuple[str, str]]:
    cases = []
    for name in BOMBS:
        d = tmp_path / name
        d.mkdir()
        (d / "rank-00000.0.msgpack").write_bytes(base[0])
        one = d / "rank-00001.0.msgpack"
        if name == "dev_zero":
            os.symlink("/dev/zero", one)
        elif name == "sparse":  # a real log, then a hole past the limit: no disk used
            one.write_bytes(base[1])
            os.truncate(one, MAX_LOG_BYTES + 1)
        elif name == "marks":
            header = frames_of(base[1])[0]
            one.write_bytes(pack([header]) + _marks(1 << 20))
        elif name == "world":
            one.write_bytes(changed(base[1], 0, 0, "world", 10**12))
        cases.append((name, str(d)))
    return cases


def test_resource_bombs_end_in_seconds_with_bounded_memory(base, tmp_path):
    """A link to /dev/zero, a sparse file past the size limit, a megabyte of frame marks, a header
    claiming 10**12 ranks: each ends within seconds under a 1 GiB address-space limit."""
    cases = _bombs(tmp_path, base)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cases)], capture_output=True, text=True,
                             timeout=60, env=env, cwd=str(tmp_path)).stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
    results = dict(json.loads(line) for line in out.splitlines() if line.startswith("["))
    assert sorted(results) == sorted(BOMBS), f"did not finish: {sorted(set(BOMBS) - set(results))}"
    for name, res in results.items():
        assert res["s"] < 20, (name, res)
        if name == "marks":  # damage (the frames after the marks were never there): a report
            assert res["code"] in (0, 1, 4), (name, res)
        else:
            assert res["code"] == 2 and len(res["err"].strip().splitlines()) == 1, (name, res)
            assert "Traceback" not in res["err"], (name, res)
    assert "character device" in results["dev_zero"]["err"]
    assert "larger than" in results["sparse"]["err"]
    assert "impossible rank/world" in results["world"]["err"]


def test_resync_work_is_linear_in_the_file_size():
    """The CRC work of a file's damage is bounded by its size (frames.resync: it was quadratic), and
    recovery still finds the good frame after the marks."""
    rec = {"k": "C", "o": 1, "g": 0, "ts": 1, "j": 0}
    for size in (1 << 18, 1 << 20):
        marks = _marks(size)
        data = marks + lf.frame(msgpack.packb(rec), 0)
        started = time.process_time()
        stream = LogStream(data, "marks")
        with deadline(30):
            got = [r for _, r, _ in stream]
        took = time.process_time() - started
        assert took < 3, (size, took)
        assert got == [rec] and stream.damage == [[0, len(marks), 0]]
        assert stream.crc_left > -(len(data) + lf.MAX_FRAME), stream.crc_left  # CRCs over ~5 times the file


# -- the schema's verdicts: the scanner's inline checks agree with logfile/records.py ---------------------------

ints = st.sampled_from([0, 1, 7, 2**30 - 1, 2**30, 2**31, 2**53, 2**63 - 1, 2**63, 2**64 - 1, -1, -2**63])
leaf = (st.none() | st.booleans() | ints | st.integers(-2**63, 2**64 - 1) | st.floats()
        | st.text(max_size=12) | st.sampled_from(["\x1b]8;;x\x07", "[/x]", "a\nb"]) | st.binary(max_size=6))
values = st.recursive(leaf, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=2) | st.integers(0, 3), inner, max_size=2), max_leaves=6)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
@given(st.integers(0, 4), st.data())
def test_the_scanners_inline_checks_give_the_schemas_verdicts(base, which, data):
    """A collective changed (a key's value, a key added or removed) after the same collective was
    read twice (so that the hot loop's caches hold it): the scan leaves it out as malformed
    exactly when logfile/records.py's schema does not take it (else it keeps it, or counts it lost when it
    names a string, tensor spec or group the log lacks)."""
    frames = frames_of(base[0])
    colls = [(f, r) for f, (recs, _) in enumerate(frames) for r, rec in enumerate(recs) if rec["k"] == "C"]
    f, r = colls[which]
    rec = dict(frames[f][0][r])
    keys = sorted(records.SCHEMA["C"][0])
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(keys + ["zz"]))
        if data.draw(st.booleans()):
            rec[key] = data.draw(values)
        else:
            rec.pop(key, None)
    # the collective as written twice, then the changed one, then the first again: event ids 5-8
    same = [([dict(frames[f][0][r], j=5 + k)], 5 + k) for k in range(2)]
    tail = [([dict(rec)], 7), ([dict(frames[f][0][r], j=8)], 8), (frames[-1][0], 9)]
    try:
        log = pack(frames[:-1] + same + tail)
    except (OverflowError, ValueError, TypeError):  # (not packable: nothing a file can hold)
        return
    scan = scan_bytes(log, "log")
    kept = [scan.eid_of(i) for i in range(len(scan.sig))]
    assert 5 in kept and 6 in kept and 8 in kept
    decoded = msgpack.unpackb(msgpack.packb(rec), raw=False, strict_map_key=False, use_list=False)
    takes = records.coll_problem(decoded, WORLD) is None and records.signature_problem(decoded, WORLD) is None
    at = sorted({scan.off[kept.index(6)], scan.off[kept.index(8)]})
    malformed = any(at[0] < offset < at[1] for offset in scan.malformed)
    assert malformed == (not takes), (decoded, scan.malformed)
    assert (7 in kept) == (takes and 7 not in scan.lost), (decoded, scan.lost)


# -- the property: any value in any key of any record ---------------------------------------------------


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_value_in_any_key_of_any_record_never_ends_in_exit_3(base, tmp_path, data):
    """diff (every format), stats, show, export and replay --emit-script, with a random key of a random record of rank 0's
    log given a random value of any msgpack type: exit 0, 1, 2 or 4, never a traceback."""
    f, r, key = data.draw(st.sampled_from(targets(base[0])))
    value = data.draw(values | st.just(-(2**63)) | st.just(2**64 - 1) | st.just(math.nan))
    try:
        log = changed(base[0], f, r, key, value)
    except (OverflowError, ValueError, TypeError):
        return
    d = run_dir(tmp_path, [log, base[1]])
    assert run_all(d) == []
    emit_script_of(d)


def emit_script_of(d: Path) -> None:
    """What `replay --emit-script` takes from the logs, without the replays it runs (processes): the
    plan built from the run and the script written from it (parsed before it is written); an
    unreadable log is an input error (exit 2), anything else a bug."""
    from collcheck.base.errors import UsageError
    from collcheck.logfile.reader import LogError
    from collcheck.replay.minimize import emit_script
    from collcheck.replay.plan import build_plan

    try:
        plan = build_plan(load_run(str(d)))
    except (LogError, UsageError):
        return
    emit_script(plan, str(d.parent / "repro.py"), "from a log with a changed record")
    ast.parse((d.parent / "repro.py").read_text())
