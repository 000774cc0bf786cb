"""Flight Recorder dumps are data from another machine (collcheck/inputs/flight_recorder/load.py, fr_schema.py,
fr_convert.py): small crafted files that would take unbounded time or memory, files that are not
regular files, failed conversions, and every field of a dump replaced by a value of every type.
Each ends in a report or one line and exit 2: never exit 3, a traceback or a hang.

The cases that would hang or exhaust memory without their guard run in one child process under
an address-space limit and a timeout (a loop inside C code answers no signal)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import pickle
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples
from support.cli import run_cli
from support.deadline import deadline
from support.fr_dumps import dump, entry, write_dumps

from collcheck.inputs.flight_recorder import convert as fr_convert
from collcheck.inputs.flight_recorder import load as fr_load
from collcheck.inputs.flight_recorder.convert import SHARE_FROM
from collcheck.inputs.flight_recorder.load import load_dump

ROOT = str(Path(__file__).resolve().parents[3])
GROUPS = {"0": [0, 1]}
ESC = "\x1b"


def _good(rank: int = 0) -> dict:
    return dump([entry(0, "0", 1, "all_reduce", [4]), entry(1, "0", 2, "broadcast", [4], state="started"),
                 entry(2, "0", 2 + rank, "all_reduce", [2], state="scheduled")], GROUPS)


def _cli(*argv, cache):
    res = run_cli(*argv, env={"XDG_CACHE_HOME": str(cache)})
    return SimpleNamespace(code=res.code, out=res.out, err=res.err)


def _one_line_error(res, text: str) -> None:
    assert res.code == 2, (res.code, res.err[-2000:])
    assert text in res.err and len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err, res.err


# -- resource bombs: one child process, under a memory limit and a timeout -------------------------


def _shared_lists(depth: int = 60) -> list:
    """1.4 KB as a pickle; `str()` of it is 2^60 long, and a recursive walk as long."""
    a: list = []
    for _ in range(depth):
        a = [a, a]
    return a


def _tuple_key_pickle(depth: int = 60) -> bytes:
    """A dump whose pg_status has a key that is a tuple of shared tuples: hashing it (as any
    unpickler building the map does) takes 2^depth steps. Built from opcodes: making this dict
    in Python would hash it."""
    t: tuple = ()
    for _ in range(depth):
        t = (t, t)
    key = pickle.dumps(t, protocol=2)[2:-1]  # without PROTO and STOP

    def item(value) -> bytes:
        return pickle.dumps(value, protocol=2)[2:-1]

    # {"version": "2.10", "entries": [...], "pg_status": {key: {}}}: EMPTY_DICT MARK ... SETITEMS
    return (b"\x80\x02}(" + item("version") + item("2.10") + item("entries")
            + item([entry(0, "0", 1, "all_reduce", [4])]) + item("pg_status") + b"}" + key + b"}s" + b"u.")


def _memo_bomb(index: int = 1 << 27) -> bytes:
    """9 bytes: None, put in the unpickler's memo at `index`. The C unpickler grows its memo to
    twice the index and clears it: 2 GiB reserved and written."""
    return b"\x80\x02Nr" + struct.pack("<I", index) + b"."


_CHILD = r"""
import contextlib, io, json, os, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from collcheck.cli import main
from collcheck.inputs.flight_recorder import load
load.DECODE_SECONDS = 0  # a worker decoding a key that hashes for ever is ended after a second
for name, argv in json.load(open(sys.argv[1])):
    out, err = io.StringIO(), io.StringIO()
    t0 = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    workers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    print(json.dumps({"name": name, "code": code, "err": err.getvalue()[-2000:], "secs": time.monotonic() - t0,
                      "workers_mb": workers_mb}), flush=True)
"""


def _bomb_cases(root: Path) -> list:
    """(name, argv) of every crafted input; its dumps written under `root`."""
    cases = []

    def add(name, dumps, fmt="pickle", files=None):
        d = root / name
        if dumps:
            write_dumps(d, dumps, fmt)
        else:
            d.mkdir(parents=True)
        for fname, data in (files or {}).items():
            (d / fname).write_bytes(data)
        cases.append((name, ["diff", "--format", "json", str(d)]))

    bomb = _shared_lists()
    for field in ("profiling_name", "process_group", "input_sizes", "input_dtypes", "frames", "thread_name",
                  "state", "unknown_field"):
        r0 = _good()
        r0["entries"][0][field] = bomb
        add(f"shared-lists-in-{field}", {0: r0, 1: _good(1)})
    r0 = _good()
    r0["pg_config"]["0"]["desc"] = bomb
    add("shared-lists-in-pg_config", {0: r0, 1: _good(1)})
    add("tuple-key", {1: _good(1)}, files={"rank_0": _tuple_key_pickle()})
    add("memo-index-in-a-worker", _many(), files={"rank_0": _memo_bomb()})
    one = entry(0, "0", 1, "all_reduce", [4])
    add("shared-entries", {0: dump([one] * 200_000, GROUPS), 1: dump([one] * 200_000, GROUPS)})
    add("rank-in-file-name", {0: _good()}, files={"rank_100000000": pickle.dumps(_good(1), protocol=2)})
    add("rank-far-from-the-others", {0: _good()}, files={"rank_1000000": pickle.dumps(_good(1), protocol=2)})
    empty = json.dumps(dump([], GROUPS))[:-3] + "[" + "{}," * fr_load.MAX_VALUES + "{}]}"
    add("json-empty-entries", {1: _good(1)}, files={"rank_0": empty.encode()})
    for world in ("1000000000000", "1048575"):
        dumps = {r: _good(r) for r in (0, 1)}
        for d in dumps.values():
            d["pg_config"]["0"]["ranks"] = f"[0, 1, {world}]"
        add(f"pg_config-rank-{world}", dumps)
    return cases


def _many() -> dict:
    """Dumps enough to be read in worker processes, by the C unpickler (with rank 0's added)."""
    return {r: _good(r) for r in range(1, SHARE_FROM + 1)}


@pytest.fixture(scope="module")
def bombs(tmp_path_factory):
    """name -> {"code", "err", "secs", "workers_mb"} of each crafted case, run in a child process
    under a 3 GiB address-space limit."""
    root = tmp_path_factory.mktemp("bombs")
    return _in_children(root, _bomb_cases(root))


def _in_children(root: Path, pending: list) -> dict:
    """Run the cases in a child process; a child that does not finish in 30 s is killed, the case
    it was in is left out (hung), and the cases after it run in a new child."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
               XDG_CACHE_HOME=str(root / "cache"), COLLCHECK_FASTPATH="0")
    results = {}
    while pending:
        (root / "cases.json").write_text(json.dumps(pending))
        try:
            out = subprocess.run([sys.executable, "-c", _CHILD, str(root / "cases.json")], check=False,
                                 capture_output=True, text=True, timeout=30, env=env).stdout
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        for line in out.splitlines():
            with contextlib.suppress(ValueError):
                r = json.loads(line)
                results[r["name"]] = r
        left = [c for c in pending if c[0] not in results]
        pending = left[1:]  # the first one left hung (or killed its child): the others go on
    return results


def _bounded(bombs, name, codes=(0, 1, 2, 4), seconds=5.0):
    r = bombs.get(name)
    assert r is not None, f"{name}: did not finish (hung, or ran out of memory and the child died)"
    assert r["code"] in codes and "Traceback" not in r["err"], r
    assert r["secs"] < seconds, r
    return r


@pytest.mark.parametrize("field", ["profiling_name", "process_group", "input_sizes", "input_dtypes", "frames",
                                   "thread_name", "state", "unknown_field", "pg_config"])
def test_shared_list_bomb_in_any_field_is_bounded(bombs, field):
    """Nested shared lists where a field's value should be: that entry is damaged (said), an
    unknown field is never walked; the group table's is the whole dump's damage (exit 2)."""
    r = _bounded(bombs, f"shared-lists-in-{field}")
    if field == "pg_config":
        assert r["code"] == 2 and "pg_config" in r["err"], r
    else:
        assert r["code"] != 2 or "damaged" in r["err"], r


def test_a_tuple_key_that_hashes_for_ever_is_refused(bombs):
    r = _bounded(bombs, "tuple-key", codes=(2,))
    assert "refused a map key" in r["err"] and len(r["err"].strip().splitlines()) == 1, r


def test_a_memo_index_that_reserves_gigabytes_is_bounded_in_a_worker(bombs):
    """The C unpickler's memo for an index in a 9-byte file: a MemoryError under the worker's
    address-space limit (a few hundred MiB above what it had), not 2 GiB written."""
    r = _bounded(bombs, "memo-index-in-a-worker", codes=(2,), seconds=3.0)
    assert "too large to read" in r["err"] and len(r["err"].strip().splitlines()) == 1, r
    assert r["workers_mb"] < 1024, r


@pytest.mark.slow  # a second of a worker's CPU time; tests/unit/inputs/test_fr_many_ranks.py kills one at once
def test_a_tuple_key_that_hashes_for_ever_ends_its_worker_only(tmp_path):
    """The C unpickler cannot be told to refuse the key: its worker's CPU-time limit ends it, and
    the dump is read again here by the Python unpickler, which refuses it."""
    d = write_dumps(tmp_path / "tuple-key", _many())
    (d / "rank_0").write_bytes(_tuple_key_pickle())
    r = _bounded(_in_children(tmp_path, [("tuple-key", ["diff", str(d)])]), "tuple-key", codes=(2,))
    assert "refused a map key" in r["err"] and len(r["err"].strip().splitlines()) == 1, r


def test_shared_references_beyond_the_file_size_are_refused(bombs):
    """200,000 references to one entry (a 400 KB file): refused, not converted entry by entry."""
    r = _bounded(bombs, "shared-entries", codes=(2,))
    assert "more values than a Flight Recorder dump of its size holds" in r["err"], r


def test_a_json_dump_of_more_values_than_any_dump_is_refused_before_it_is_parsed(bombs):
    """8.4 million empty entries (25 MB of `{},`): refused from a count of its bytes before a
    value is built, as a pickle of as many values is (benchmarks/bench_fr_json.py: 160 MiB of
    them under a 2 GiB limit)."""
    r = _bounded(bombs, "json-empty-entries", codes=(2,))
    assert f"more than {fr_load.MAX_VALUES:,} values" in r["err"] and len(r["err"].strip().splitlines()) == 1, r


def test_json_and_pickle_dumps_are_read_under_one_value_bound(tmp_path, monkeypatch):
    """A JSON dump reads as its pickle does; with the bound (load.MAX_VALUES) below what it holds,
    one line and exit 2, as for the pickle."""
    dumps = {0: _good(), 1: _good(1)}
    for fmt in ("json", "pickle"):
        assert _cli("diff", "--format", "json", str(write_dumps(tmp_path / fmt, dumps, fmt)),
                    cache=tmp_path / f"c-{fmt}").code in (0, 1)
    monkeypatch.setattr(fr_load, "MAX_VALUES", 50)
    for fmt in ("json", "pickle"):
        _one_line_error(_cli("diff", str(tmp_path / fmt), cache=tmp_path / f"small-{fmt}"), "more than 50")


def test_a_rank_number_in_a_file_name_allocates_nothing(bombs):
    assert "beyond any job's" in _bounded(bombs, "rank-in-file-name", codes=(2,))["err"]
    assert "named nowhere" in _bounded(bombs, "rank-far-from-the-others", codes=(2,))["err"]


def test_a_group_table_claiming_a_huge_world_allocates_nothing(bombs):
    assert "ranks below 1048576" in _bounded(bombs, "pg_config-rank-1000000000000", codes=(2,))["err"]
    assert "named nowhere" in _bounded(bombs, "pg_config-rank-1048575", codes=(2,))["err"]


# -- nesting, sizes, kinds of files ------------------------------------------------------------------


def test_deep_nesting_is_one_line_or_a_damaged_entry(tmp_path):
    """JSON nested 100,000 deep cannot be parsed: one line, exit 2. In a pickle (built without
    recursion), a value nested 1,000 deep where a name or shape should be is that entry's damage."""
    d = tmp_path / "json"
    d.mkdir()
    (d / "rank_0").write_text('{"version": "2.10", "entries": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _one_line_error(_cli("diff", str(d), cache=tmp_path / "c"), "nested deeper than a dump is")
    deep: list = []
    for _ in range(1000):
        deep = [deep]
    r0 = _good()
    r0["entries"][1]["profiling_name"] = deep
    r0["entries"][2]["input_sizes"] = deep
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit + 4000)  # pickle.dumps recurses; the unpickler does not
    try:
        d = write_dumps(tmp_path / "pickle", {0: r0, 1: _good(1)})
    finally:
        sys.setrecursionlimit(limit)
    res = _cli("diff", "--format", "json", str(d), cache=tmp_path / "c")
    assert res.code in (0, 1, 4), (res.code, res.err)
    assert "2 damaged entries left out (entry 1: profiling_name: a list, not a text)" in res.out, res.out[:3000]


def test_an_oversized_dump_is_refused_before_it_is_read_or_hashed(tmp_path, monkeypatch):
    """A sparse file (no disk used) one byte over the limit, with a pickle's first bytes: refused
    by its size; nothing of it is read into the conversion's hash."""
    d = write_dumps(tmp_path / "dumps", {0: _good(), 1: _good(1)})
    big = d / "comm_lib_trace_rank_1"
    os.truncate(big, fr_load.MAX_DUMP + 1)
    hashed = []
    real = fr_convert.hashlib.sha1

    class Spy:
        def __init__(self, data=b""):
            self.h = real(data)

        def update(self, data):
            hashed.append(len(data))
            self.h.update(data)

        def hexdigest(self):
            return self.h.hexdigest()

    monkeypatch.setattr(fr_convert.hashlib, "sha1", Spy)
    tracemalloc.start()
    try:
        _one_line_error(_cli("diff", str(d), cache=tmp_path / "c"), "larger than any Flight Recorder dump")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert max(hashed, default=0) < 1 << 20, hashed
    assert peak < fr_load.MAX_DUMP // 4, peak  # its bytes were never read into memory


def test_a_fifo_among_the_dumps_is_never_opened(tmp_path):
    """torch's dump trigger is a FIFO next to the dumps (`<prefix><rank>.pipe`): passed over, never
    opened (an open would wait for a writer for ever). Named as the target: one line."""
    d = write_dumps(tmp_path / "dumps", {0: _good(), 1: _good(1)})
    os.mkfifo(d / "comm_lib_trace_rank_0.pipe")
    os.mkfifo(d / "comm_lib_trace_rank_2")
    with deadline(10):
        res = _cli("diff", "--format", "json", str(d), cache=tmp_path / "c")
        assert res.code in (0, 1), (res.code, res.err)
        assert sorted(json.loads(res.out)["ranks"]) == ["0", "1"]
        _one_line_error(_cli("diff", str(d / "comm_lib_trace_rank_2"), cache=tmp_path / "c"), "a FIFO")


def test_a_link_to_a_device_is_refused(tmp_path):
    d = write_dumps(tmp_path / "dumps", {0: _good(), 1: _good(1)})
    os.symlink("/dev/zero", d / "comm_lib_trace_rank_3")
    with deadline(10):
        res = _cli("diff", "--format", "json", str(d), cache=tmp_path / "c")
        assert res.code in (0, 1), (res.code, res.err)
        with pytest.raises(fr_load.LogError, match="a character device"):
            fr_load.read_dump_bytes(str(d / "comm_lib_trace_rank_3"))
        _one_line_error(_cli("diff", str(d / "comm_lib_trace_rank_3"), cache=tmp_path / "c"), "a character device")


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), RuntimeError("a bug")])
def test_a_failed_conversion_leaves_nothing_in_the_cache(tmp_path, monkeypatch, failure):
    d = write_dumps(tmp_path / "dumps", {0: _good(), 1: _good(1)})
    real = fr_convert._write_logs

    def half_written(dumps, run_dir):
        real(dumps, run_dir)
        raise failure

    monkeypatch.setattr(fr_convert, "_write_logs", half_written)
    res = _cli("diff", str(d), cache=tmp_path / "c")
    assert res.code == (2 if isinstance(failure, OSError) else 3), res.err
    assert os.listdir(tmp_path / "c" / "collcheck" / "fr") == []
    monkeypatch.setattr(fr_convert, "_write_logs", real)
    assert _cli("diff", str(d), cache=tmp_path / "c").code in (0, 1)
    assert [p for p in os.listdir(tmp_path / "c" / "collcheck" / "fr") if ".tmp" in p] == []


# -- the schema --------------------------------------------------------------------------------------


def test_strings_are_escaped_when_the_dump_is_read(tmp_path):
    r0 = _good()
    e = r0["entries"][0]
    e["profiling_name"] = f"nccl:all_reduce{ESC}]8;;http://x{ESC}\\"
    e["process_group"] = (f"0{ESC}[31m", f"[/x]{ESC}")
    e["thread_name"] = f"t{ESC}[2J"
    e["frames"] = [{"name": f"f{ESC}", "filename": f"/home/{ESC}[1m.py", "line": 3}]
    r0["pg_config"]["0"]["desc"] = f"d{ESC}"
    (tmp_path / "rank_0").write_bytes(pickle.dumps(r0, protocol=2))
    got = load_dump(str(tmp_path / "rank_0"))
    texts = [got["pg_config"]["0"]["desc"], *got["entries"][0]["process_group"], got["entries"][0]["profiling_name"],
             got["entries"][0]["thread_name"], *got["entries"][0]["frames"][0][::2]]
    assert all(ESC not in t and "\\x1b" in t for t in texts), texts


@pytest.mark.parametrize("field, value, why", [
    ("collective_seq_id", 2**63, "collective_seq_id: out of range"),
    ("collective_seq_id", 1.5, "collective_seq_id: a float, not a whole number"),
    ("input_sizes", [[-1]], "input_sizes: out of range"),
    ("input_sizes", [4], "input_sizes: an int, not a list of dimensions"),
    ("is_p2p", "yes", "is_p2p: a str, not true or false"),
    ("frames", [{"filename": "a.py", "line": 2 * 10**9, "name": "f"}], "frames: line 2000000000 out of range"),
    ("duration_ms", math.nan, "duration_ms: a float, not a duration"),
    ("profiling_name", b"nccl:all_reduce", "profiling_name: a bytes, not a text"),
    ("duration_ms", 10**400, "duration_ms: an int, not a duration"),
])
def test_a_value_of_the_wrong_type_damages_its_entry_only(tmp_path, field, value, why):
    r0 = _good()
    r0["entries"][1][field] = value
    (tmp_path / "rank_0").write_bytes(pickle.dumps(r0, protocol=4))  # protocol 2 writes bytes as a call
    got = load_dump(str(tmp_path / "rank_0"))
    assert (got["damaged"], got["damage"], len(got["entries"])) == (1, f"entry 1: {why}", 2)


# -- every field, every type: diff, stats, export never end in exit 3 --------------------------------


FIELDS = sorted(entry(0, "0", 1, "all_reduce", [4]))
TABLES = ["version", "entries", "pg_config", "pg_status", "comm_lib_version", "pg_config.ranks", "pg_config.desc",
          "pg_status.last_completed_collective", "pg_status.last_enqueued_collective"]
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.sampled_from([0, 1, -1, 2**31, 2**63, 2**64, 10**12, -(2**63)]),
    st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "1", "-1", "2.10", "nccl:send 0->99999999", "nccl:recv 1<-0", "gloo:all_reduce",
                     f"{ESC}[31m[/x][link=http://e]", "[0, 1]", "[0, 1048575]", "\ud800"]),
    st.text(max_size=20), st.binary(max_size=8))
VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)
COMMANDS = [["diff", "--format", f] for f in ("text", "json", "junit", "github")] + [
    ["stats"], ["stats", "--format", "json"], ["export", "--format", "perfetto", "-o", "{out}/trace.json"],
    ["export", "--format", "fr", "-o", "{out}/fr"]]


def _replace(dumps: dict, where: str, value, everywhere: bool) -> None:
    """Set `where` (an entry field, "table.key" or a top-level key) to `value` in rank 0's dump,
    or in both ranks' (and then in every entry); a place an earlier change removed is left."""
    for rank, d in dumps.items():
        if rank and not everywhere:
            continue
        if where in FIELDS:
            entries = d.get("entries")
            for e in (entries if everywhere else entries[:1]) if isinstance(entries, list) else ():
                if isinstance(e, dict):
                    e[where] = value
        elif "." in where:
            table, key = where.split(".")
            info = d[table].setdefault("0", {}) if isinstance(d.get(table), dict) else None
            if isinstance(info, dict):
                info[key] = value
        else:
            d[where] = value


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                            HealthCheck.too_slow])
@given(changes=st.lists(st.tuples(st.sampled_from(FIELDS + TABLES), VALUES, st.booleans()), min_size=1, max_size=3),
       fmt=st.sampled_from(["pickle", "json"]))
def test_every_field_with_every_type_never_ends_in_exit_3(tmp_path_factory, changes, fmt):
    """Up to three fields (of the first entry of rank 0, or of every entry of both ranks; of the
    group table, the counters, the header) replaced by values of any type; written as a pickle,
    or as JSON where JSON can hold them."""
    dumps = {r: _good(r) for r in (0, 1)}
    for d in dumps.values():
        d["pg_status"] = {"0": {"last_enqueued_collective": 2, "last_started_collective": 2,
                                "last_completed_collective": 1}}
    for where, value, everywhere in changes:
        _replace(dumps, where, value, everywhere)
    root = tmp_path_factory.mktemp("fuzz")
    try:
        d = write_dumps(root / "dumps", dumps, fmt)
    except (TypeError, ValueError):  # not something JSON can hold (bytes, a non-text key)
        d = write_dumps(root / "pickled", dumps, "pickle")
    for argv in COMMANDS:
        argv = [a.format(out=root) for a in argv]
        with deadline(20):
            res = _cli(*argv, str(d), cache=root / "cache")
        assert res.code in (0, 1, 2, 4) and "Traceback" not in res.err, (argv, res.code, res.err[-2000:])
        if res.code == 2:
            assert len(res.err.strip().splitlines()) == 1, res.err
