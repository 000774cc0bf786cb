"""The one record decoder (collcheck/logfile/decode.py): a log written by LogWriter reads back
as the records and tables it was given; what a lost interning record leaves; reading an
event again at its offset; the header and interning builders (logfile/records.py)."""

from __future__ import annotations

import os

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.logbytes import format1, small_program

from collcheck import synth
from collcheck.logfile import format as lf
from collcheck.logfile.decode import INTERNED, Decoder, LogFile, Tables
from collcheck.logfile.ops import P2P_OPS, ROOTED_OPS
from collcheck.logfile.reader import (
    LogError,
    LogStream,
    check_header,
    parse_log,
    read_bytes,
)
from collcheck.logfile.records import SCHEMA, header_record, known_header
from collcheck.logfile.scan import scan_bytes
from collcheck.logfile.writer import LogWriter, open_exclusive
from collcheck.model import load_run

_pack = msgpack.Packer(use_bin_type=True).pack
_text = st.text(max_size=12)
_site = st.tuples(_text, st.integers(0, 10 ** 6), _text)
_tensors = st.lists(st.tuples(st.sampled_from(["float32", "int64", "bfloat16"]),
                              st.lists(st.integers(0, 64), max_size=3).map(tuple)), max_size=3).map(tuple)
# what a rank writes: collectives from call sites (with a chain of the user's frames above them),
# with tensor specs, labels and threads, in any order and with repeats
_calls = st.lists(st.tuples(_site, st.lists(_site, max_size=3), _tensors, st.one_of(st.none(), _text),
                            st.integers(0, 3)), min_size=1, max_size=25)


def _write(path_dir: str, calls, max_bytes: int = 0) -> tuple[str, list[dict]]:
    """A log of `calls` written by LogWriter, and what each collective was written from:
    {site, chain (outermost first, the site last), tensors, label, thread}."""
    fd, path = open_exclusive(path_dir, "rank-00000.0")
    w = LogWriter(fd, path, max_bytes=max_bytes)
    written = []
    with w.lock:
        w.write(header_record(0, 1, "r", backend="gloo"))
        w.keep({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "r": [0]})
        threads = {}
        for i, (site, outer, tensors, label, thread) in enumerate(calls):
            if thread not in threads:
                threads[thread] = f"thread-{thread}"
                w.keep({"k": lf.THREAD, "h": thread, "n": threads[thread], "id": thread})
            s = w.site_id(*site)
            rec = {"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": i, "j": i, "s": s, "h": thread,
                   "t": w.tspec_id(tensors)}
            rec["ch"] = w.chain_id((*(w.site_id(*f) for f in outer), s))
            if label is not None:
                rec["l"] = w.string_id(label)
            w.write(rec, i)
            w.done(i, i + 1, i + 2)
            written.append({"site": site, "chain": (*outer, site), "tensors": tensors, "label": label,
                            "thread": threads[thread]})
    w.close()
    return path, written


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=_calls)
def test_a_log_written_by_logwriter_decodes_to_what_was_written(tmp_path_factory, calls):
    path, written = _write(str(tmp_path_factory.mktemp("log")), calls)
    with open(path, "rb") as f:
        data = f.read()
    decoder = Decoder(LogStream(data, path))
    records = [r for _, r, _ in decoder]
    # every record but the interning ones, in order, as the reader yields them (arrays: tuples)
    raw = parse_log(data)
    assert records[0]["k"] == lf.HEADER and check_header(records[0], path) == raw.header
    assert _pack(records[1:]) == _pack([r for r in raw.records if r["k"] not in INTERNED])
    colls = [r for r in records if r["k"] == lf.COLL]
    t = decoder.tables
    assert len(colls) == len(written)
    for rec, w in zip(colls, written):
        assert t.sites[rec["s"]] == w["site"]
        assert t.chains[rec["ch"]] == w["chain"]
        assert t.tspecs[rec["t"]] == w["tensors"]
        assert (t.strings[rec["l"]] if "l" in rec else None) == w["label"]
        assert t.threads[rec["h"]] == w["thread"]
        assert t.strings[rec["o"]] == "allreduce_"
    # the scanner reads the same tables: every chain key resolves to the frames written
    scan = scan_bytes(data, path)
    assert [scan.chain_sites[k] for k in scan.chain] == [w["chain"] for w in written]
    assert set(scan.sites) == {w["site"] for w in written} | {f for w in written for f in w["chain"]}


def test_a_capped_log_resolves_every_segment_alike(tmp_path):
    """Later segments repeat the tables: decoding the whole log gives each id one meaning."""
    calls = [(("/x/train.py", 10 + i % 40, "step"), [("/x/main.py", 5, "main")], (("float32", (i % 7,)),), None, 0)
             for i in range(3000)]
    path, written = _write(str(tmp_path), calls, max_bytes=60_000)
    decoder = Decoder(LogStream(read_bytes(path), path))
    colls = [r for _, r, _ in decoder if r["k"] == lf.COLL]
    # the first file and the newest segments: those between were deleted, their tables repeated after
    assert colls[-1]["ts"] == len(written) - 1 and len(colls) < len(written) - 100
    for rec in colls:
        w = written[rec["ts"]]
        assert decoder.tables.sites[rec["s"]] == w["site"] and decoder.tables.chains[rec["ch"]] == w["chain"]
        assert decoder.tables.tspecs[rec["t"]] == w["tensors"]


def _frames(*records, colls_before=0) -> bytes:
    return lf.frame(b"".join(_pack(r) for r in records), colls_before)


def test_what_a_lost_interning_record_leaves():
    """A site whose string is gone names '?', a chain frame whose site is gone is None, a tensor
    spec whose dtype is gone is None (the scanner then leaves its collectives out as lost)."""
    header = header_record(0, 1, "r")
    data = _frames(header, {"k": "S", "i": 0, "s": "/x/a.py"},
                   {"k": "F", "i": 0, "f": 0, "l": 3, "n": 7},  # function name string 7: lost
                   {"k": "K", "i": 0, "s": [0, 9]},  # site 9: lost
                   {"k": "V", "i": 0, "t": [[8, [2]]]},  # dtype string 8: lost
                   {"k": "T", "n": "MainThread", "id": 1})  # (no h: thread 0)
    decoder = Decoder(LogStream(data, "log"))
    assert [r["k"] for _, r, _ in decoder] == ["H"]
    t = decoder.tables
    assert t.sites == {0: ("/x/a.py", 3, "?")}
    assert t.chains == {0: (("/x/a.py", 3, "?"), None)}
    assert t.tspecs == {0: None}
    assert t.threads == {0: "MainThread"}
    assert t.chain_sites([0, -2, -3, -1, 5]) == {0: (("/x/a.py", 3, "?"), None), -2: (("/x/a.py", 3, "?"),)}


def test_tables_take_only_the_interning_kinds():
    t = Tables()
    for kind in sorted(lf.ALL_KINDS):
        assert t.take({"k": kind, "i": 0, "s": "x", "f": 0, "l": 1, "n": "t", "t": []}) == (kind in INTERNED)
    assert INTERNED == {lf.STRING, lf.SITE, lf.CHAIN, lf.TSPEC, lf.THREAD}


@pytest.mark.parametrize("framed", [True, False], ids=["format2", "format1"])
def test_events_in_one_pass_are_the_events_one_by_one(tmp_path, framed):
    paths = synth.write_run(str(tmp_path), small_program(2))
    if not framed:
        for p in paths:
            with open(p, "rb") as f:
                data = format1(f.read())
            with open(p, "wb") as f:
                f.write(data)
    run = load_run(str(tmp_path))
    log = run.ranks[0]
    file = run.log_file(log.path)
    eids = [log.eid_of(i) for i in range(len(log))]
    one_pass = file.events(eids)
    assert (one_pass is None) == (not framed)  # format 1: event by event
    one_by_one = [file.event(log.off[i], e) for i, e in enumerate(eids)]
    assert one_pass is None or one_pass == one_by_one
    assert [c["ts"] for c, _ in one_by_one] == [10, 110, 210] and all(d["c"] == c["ts"] + 40 for c, d in one_by_one)
    assert log.events() == [log.event(i) for i in range(len(log))]
    assert run.log_file(log.path) is file  # read once


def test_header_record_keys_follow_the_schema_whatever_the_call_order():
    a = header_record(3, 4, "run", hang_s=1.0, backend="gloo", torch="2.13", argv=("train.py", "-x"), cpus=8)
    b = header_record(3, 4, "run", cpus=8, argv=["train.py", "-x"], torch="2.13", backend="gloo", hang_s=1.0)
    assert list(a) == list(b) == ["k", "magic", "v", "collcheck", "torch", "backend", "rank", "world", "run", "cpus",
                                  "argv", "hang_s"]
    assert _pack(a) == _pack(b) and a["argv"] == ["train.py", "-x"]
    assert a["k"] == lf.HEADER and a["magic"] == lf.MAGIC and a["v"] == lf.FORMAT_VERSION
    assert check_header(a, "log") == a == known_header(a)
    assert list(SCHEMA[lf.HEADER][0])[:3] == ["magic", "v", "collcheck"]
    with pytest.raises(TypeError, match="extra"):
        header_record(0, 1, "r", extra=1)


def test_known_header_drops_what_the_schema_does_not_know():
    h = {"k": "H", "magic": lf.MAGIC, "v": 2, "rank": 0, "world": 1, "run": "r", "later": {"x": 1}, "argv": ("a",)}
    assert known_header(h) == {"k": "H", "magic": lf.MAGIC, "v": 2, "rank": 0, "world": 1, "run": "r", "argv": ["a"]}


def test_the_op_sets_come_from_the_op_table():
    assert P2P_OPS == {"send", "recv_", "recv_any_source_"}
    assert ROOTED_OPS == {"broadcast_", "reduce_", "gather_", "scatter_"}
    # the channel kinds in a `j` counter's key are on disk (and in the compiled writer's keys)
    assert [lf.seq_key(5, op, 3) for op in ("send", "recv_", "recv_any_source_", "allreduce_")] == [
        (5 << 34) | (1 << 32) | 3, (5 << 34) | (2 << 32) | 3, (5 << 34) | (3 << 32) | 3, 5 << 34]


def test_the_stream_declares_the_frame_readers_state():
    """frames.py keeps its place on the LogStream: declared there (slots), nothing added from outside."""
    data = _frames(header_record(0, 1, "r"), colls_before=0) + _frames({"k": "Z", "ts": 1}, colls_before=0)
    stream = LogStream(data, "log")
    assert not hasattr(stream, "__dict__")
    assert (stream.expect, stream.last_eid, stream.recent) == (0, -1, [])
    assert [r["k"] for _, r, _ in stream] == ["H", "Z"]
    assert stream.last_eid == 0 and len(stream.recent) == 2 and stream.good_bytes == len(data)
    with pytest.raises(AttributeError):
        stream.undeclared = 1


def test_a_log_file_that_changed_is_one_line(tmp_path):
    paths = synth.write_run(str(tmp_path), small_program(2))
    file = LogFile(paths[0])
    with pytest.raises(LogError, match="changed while it was read"):
        file.event(len(file.data), 0)
    assert os.path.getsize(paths[0]) == len(file.data)
