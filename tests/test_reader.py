"""The log reader and the CLI on damaged, foreign and mixed inputs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import zlib

import msgpack
import pytest

from collcheck import logformat as lf, synth
from collcheck.capture.writer import LogWriter, open_exclusive
from collcheck.cli import main
from collcheck.analysis.diff import analyse
from collcheck.model import load_run
from collcheck.reader import LogError, parse_log, read_log


def small_program(world=2):
    prog = synth.Program(world, {"0": tuple(range(world))}, [])
    a, b = prog.add_site(), prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=a),
                synth.Op("broadcast_", "0", (("bfloat16", (2, 3)),), root=1, site=b),
                synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=a)]
    return prog


@pytest.fixture
def small_log(tmp_path):
    paths = synth.write_run(str(tmp_path / "run"), small_program())
    with open(paths[0], "rb") as f:
        return paths[0], f.read()


def _unpack(data: bytes):
    u = msgpack.Unpacker(raw=False, strict_map_key=False)
    u.feed(data)
    return list(u)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return value, pos
        shift += 7


def frames(data: bytes) -> list[tuple[int, int, list]]:
    """(start, end, records) of each frame, decoded as docs/log-format.md describes the format."""
    out, pos = [], 0
    while pos < len(data):
        assert data[pos] == 0xC1, pos
        length, p = _varint(data, pos + 5)
        eid, p = _varint(data, p)
        end = p + length
        assert zlib.crc32(data[pos + 5:end]) == int.from_bytes(data[pos + 1:pos + 5], "little"), pos
        recs = []
        for rec in _unpack(data[p:end]):  # completions a C record carries are D records
            if rec["k"] == "C":
                for entry in rec.get("d", ()):
                    done = {"k": "D", "i": eid - entry[0], "r": rec["ts"] - entry[1]}
                    if len(entry) > 2:
                        done["c"] = rec["ts"] - entry[2]
                    recs.append(done)
                eid += 1
            recs.append(rec)
        out.append((pos, end, recs))
        pos = end
    return out


def record_ends(data: bytes, framed: bool) -> tuple[list, list[int]]:
    """All records, and the byte offset after which each one is readable (its frame's end)."""
    if not framed:
        u = msgpack.Unpacker(raw=False, strict_map_key=False)
        u.feed(data)
        recs, ends = [], []
        for rec in u:
            recs.append(rec)
            ends.append(u.tell())
        return recs, ends
    recs, ends = [], []
    for _, end, rs in frames(data):
        recs += rs
        ends += [end] * len(rs)
    return recs, ends


def format1(data: bytes) -> bytes:
    """The same log in format 1 (a plain msgpack stream, no frames), as older collcheck wrote it."""
    recs = [r for _, _, rs in frames(data) for r in rs]
    recs[0]["v"] = 1
    for r in recs:
        r.pop("j", None)
        r.pop("d", None)
    return b"".join(msgpack.packb(r) for r in recs)


# -- round trip ------------------------------------------------------------------------


def test_writer_reader_round_trip(tmp_path):
    fd, path = open_exclusive(str(tmp_path), "rank-00000.0")
    w = LogWriter(fd, path)
    header = {"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "r"}
    with w.lock:
        w.write(header)
        s = w.site_id("/x/train.py", 12, "step")
        t = w.tspec_id((("float32", (4, 2)),))
        w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": 5, "t": t, "s": s, "r": 0})
        w.queue({"k": lf.DONE, "i": 0, "r": 6, "c": 9})
    w.close()
    raw = read_log(path)
    assert raw.header == header
    assert not raw.torn and raw.junk is None and raw.good_bytes == raw.size == os.path.getsize(path)
    kinds = [r["k"] for r in raw.records]
    # interned strings / site / tensor spec come before the record that uses them, in one write
    assert kinds == ["S", "S", "F", "S", "V", "S", "C", "D"]
    strings = {r["i"]: r["s"] for r in raw.records if r["k"] == "S"}
    coll = raw.records[-2]
    assert strings[coll["o"]] == "allreduce_"
    spec = next(r for r in raw.records if r["k"] == "V")
    assert [[strings[d], dims] for d, dims in spec["t"]] == [["float32", [4, 2]]]
    # a second writer for the same rank does not clobber the first file
    fd2, path2 = open_exclusive(str(tmp_path), "rank-00000.0")
    os.close(fd2)
    assert path2 != path


def test_synthetic_run_round_trip(tmp_path):
    prog = small_program(3)
    synth.write_run(str(tmp_path), prog)
    run = load_run(str(tmp_path))
    assert sorted(run.ranks) == [0, 1, 2] and run.world == 3
    for rank, log in run.ranks.items():
        assert log.trailer and log.state == "finished" and not log.torn
        evs = [log.event(i) for i in range(len(log))]
        assert [e.sig.op for e in evs] == ["allreduce_", "broadcast_", "allreduce_"]
        assert evs[1].sig.tensors == (("bfloat16", (2, 3)),) and evs[1].sig.root == 1
        assert evs[0].site == evs[2].site and evs[0].site != evs[1].site
        assert all(e.completed for e in evs)
        assert [e.position for e in evs] == [0, 1, 2]


# -- torn files ----------------------------------------------------------------------------


@pytest.mark.parametrize("framed", [True, False], ids=["format2", "format1"])
def test_cut_at_every_byte_offset(small_log, framed):
    path, data = small_log
    if not framed:
        data = format1(data)
    full, ends = record_ends(data, framed)
    assert ends[-1] == len(data) and len(full) > 10
    previous = None
    for cut in range(len(data) + 1):
        chunk = data[:cut]
        complete = sum(1 for e in ends if e <= cut)
        if complete == 0:
            with pytest.raises(LogError) as info:
                parse_log(chunk, path)
            assert "\n" not in str(info.value)
            continue
        raw = parse_log(chunk, path)
        got = [raw.header] + raw.records
        assert got == full[:complete], cut
        assert raw.good_bytes == ends[complete - 1]
        assert raw.torn == (cut > raw.good_bytes) and raw.junk is None and not raw.damage
        if previous is not None:
            assert len(got) >= previous  # more bytes never lose a record
        previous = len(got)
    assert previous == len(full)


@pytest.mark.parametrize("framed", [True, False], ids=["format2", "format1"])
def test_scanner_cut_at_every_byte_offset(small_log, framed):
    """The analysis reads through collcheck.scan: it must agree with parse_log at every cut."""
    from collcheck.scan import scan_bytes

    path, data = small_log
    if not framed:
        data = format1(data)
    for cut in range(len(data) + 1):
        chunk = data[:cut]
        try:
            raw = parse_log(chunk, path)
        except LogError:
            with pytest.raises(LogError):
                scan_bytes(chunk, path)
            continue
        scan = scan_bytes(chunk, path)
        assert len(scan.sig) == sum(1 for r in raw.records if r["k"] == "C"), cut
        assert (scan.good_bytes, scan.torn, scan.junk) == (raw.good_bytes, raw.torn, raw.junk), cut


def test_cut_file_loads_as_killed_rank(tmp_path):
    prog = small_program()
    paths = synth.write_run(str(tmp_path), prog)
    with open(paths[1], "rb") as f:
        data = f.read()
    # cut inside the last C record: rank 1 has issued two collectives, completed one
    recs, ends = record_ends(data, True)
    c_ends = [off for r, off in zip(recs, ends) if r["k"] == "C"]
    cut = c_ends[2] - 3
    with open(paths[1], "wb") as f:
        f.write(data[:cut])
    run = load_run(str(tmp_path))
    log = run.ranks[1]
    assert log.torn and not log.trailer and len(log) == 2 and len(recs) > len(log)
    assert log.state in ("killed", "killed-in-collective")


def test_empty_file_raises(tmp_path):
    p = tmp_path / "rank-00000.0.msgpack"
    p.write_bytes(b"")
    with pytest.raises(LogError, match="empty"):
        read_log(str(p))


def test_format1_stops_at_corrupt_bytes(small_log):
    """Format 1 has no frames: reading stops at the first bad byte (format 2 goes on: below)."""
    path, data = small_log
    data = format1(data)
    full, ends = record_ends(data, False)
    at = ends[len(ends) // 2]
    bad = data[:at] + b"\xc1\xc1\xc1 garbage" + data[at:]  # 0xc1 is never valid msgpack
    raw = parse_log(bad, path)
    assert [raw.header] + raw.records == full[: len(ends) // 2 + 1]
    assert raw.junk and "byte" in raw.junk and not raw.torn
    # a valid msgpack value that is not a record also stops the reader
    raw = parse_log(data[:at] + msgpack.packb([1, 2, 3]) + data[at:], path)
    assert raw.junk and "unexpected" in raw.junk and len(raw.records) == len(ends) // 2
    # zero padding after a crash (a file system that extended the file) is a torn tail
    raw = parse_log(data[:at] + b"\0" * 64, path)
    assert raw.torn and raw.junk is None


@pytest.mark.parametrize("content", [
    json.dumps({"k": "H", "magic": "collcheck-log"}).encode(),
    bytes(random.Random(3).randrange(256) for _ in range(4096)),
    msgpack.packb({"k": "H", "v": 1, "rank": 0, "world": 1, "run": "x"}),  # no magic
    msgpack.packb({"hello": "world"}) * 3,
    b"\x89PNG\r\n\x1a\n" + b"\0" * 100,
])
def test_foreign_files_raise_one_line(tmp_path, content):
    p = tmp_path / "rank-00000.0.msgpack"
    p.write_bytes(content)
    with pytest.raises(LogError) as info:
        read_log(str(p))
    msg = str(info.value)
    assert "\n" not in msg and str(p) in msg


def test_newer_format_version_asks_to_upgrade():
    data = msgpack.packb({"k": "H", "magic": lf.MAGIC, "v": lf.FORMAT_VERSION + 1, "rank": 0, "world": 1, "run": "x"})
    with pytest.raises(LogError, match="upgrade"):
        parse_log(data, "x.msgpack")


def test_header_without_rank_raises():
    data = msgpack.packb({"k": "H", "magic": lf.MAGIC, "v": 1, "world": 1, "run": "x"})
    with pytest.raises(LogError, match="rank"):
        parse_log(data)


def test_garbage_between_frames_is_skipped(small_log):
    path, data = small_log
    fr = frames(data)
    full = [r for _, _, rs in fr for r in rs]
    at = fr[len(fr) // 2][0]
    for junk in (b"\xc1\xc1\xc1 garbage", msgpack.packb([1, 2, 3]), b"\0" * 64):
        raw = parse_log(data[:at] + junk + data[at:], path)
        assert [raw.header] + raw.records == full and not raw.torn
        assert raw.damage == [[at, at + len(junk), 0]]
    raw = parse_log(data[:at] + b"\0" * 64, path)  # reserved space never written: the end
    assert not raw.torn and not raw.damage and [raw.header] + raw.records == [r for f in fr if f[0] < at for r in f[2]]


def test_record_needing_a_lost_string_is_left_out(tmp_path):
    """A collective whose op string was lost (damage) cannot be matched: it is counted as lost."""
    paths = synth.write_run(str(tmp_path), small_program())
    with open(paths[0], "ab") as f:
        f.write(lf.frame(msgpack.packb({"k": "C", "o": 999, "g": 0, "j": 3}), 3))  # string never defined
    run = load_run(str(tmp_path))
    assert len(run.ranks[0]) == 3 and run.ranks[0].lost == [3]


def test_malformed_record_is_a_log_error(tmp_path):
    """A record that checks (CRC) but has the wrong types was not written by collcheck."""
    prog = small_program()
    paths = synth.write_run(str(tmp_path), prog)
    with open(paths[0], "ab") as f:
        f.write(lf.frame(msgpack.packb({"k": "D", "i": "x"}), 3))
    with pytest.raises(LogError, match="malformed"):
        load_run(str(tmp_path))


# -- the CLI on bad inputs ---------------------------------------------------------------------


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "collcheck.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def make_case(tmp_path, case):
    d = tmp_path / case
    if case == "missing-dir":
        return d
    d.mkdir()
    if case == "empty-dir":
        return d
    paths = synth.write_run(str(d), small_program())
    if case == "zero-bytes":
        open(paths[0], "wb").close()
    elif case == "corrupt":
        with open(paths[0], "wb") as f:
            f.write(bytes(random.Random(1).randrange(256) for _ in range(500)))
    elif case == "two-runs":
        other = small_program(3)  # another run's logs in a subfolder (subfolders are searched)
        other.run_id = "another-run"
        synth.write_run(str(d / "x"), other)
    elif case == "unknown-version":
        with open(paths[1], "wb") as f:
            f.write(msgpack.packb({"k": "H", "magic": lf.MAGIC, "v": 99, "rank": 1, "world": 2, "run": "synth"}))
    elif case == "same-rank-twice":
        synth.write_run(str(d), small_program())
    return d


CASES = ["empty-dir", "missing-dir", "zero-bytes", "corrupt", "two-runs", "unknown-version", "same-rank-twice"]


@pytest.mark.parametrize("case", CASES)
def test_cli_input_errors(tmp_path, case):
    target = make_case(tmp_path, case)
    proc = cli("diff", str(target))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collcheck: error:"), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    if case == "unknown-version":
        assert "upgrade" in lines[0]
    if case == "two-runs":
        assert "different runs" in lines[0]


@pytest.mark.parametrize("case", ["zero-bytes", "corrupt", "two-runs"])
def test_cli_main_in_process(tmp_path, case, capsys):
    assert main(["diff", str(make_case(tmp_path, case))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("collcheck: error:") and err.count("\n") == 1


def test_cli_clean_and_faulty_runs(tmp_path):
    prog = small_program(3)
    synth.write_run(str(tmp_path / "clean"), prog)
    proc = cli("diff", str(tmp_path / "clean"))
    assert proc.returncode == 0, proc.stderr
    synth.write_run(str(tmp_path / "bad"), prog, [synth.Fault("shape_mismatch", 2, 1)])
    proc = cli("diff", str(tmp_path / "bad"), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    first = json.loads(proc.stdout)["findings"][0]
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("shape_mismatch", "0", 1, [2])


def test_python_dash_m_collcheck(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "collcheck", "diff", str(tmp_path / "nothing")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("collcheck: error:")


@pytest.mark.parametrize("dump, state", [
    ("Fatal Python error: Aborted\n\nThread 0x00007f (most recent call first):\n  <no Python frame>\n", "crashed"),
    # a SIGTERM dump that faulthandler could not finish (a thread died under it): still a kill
    ("Thread 0x00007f (most recent call first):\n  <no Python frame>\n\nFatal Python error: Segmentation fault\n",
     "killed"),
    ("", "killed"),
])
def test_dump_beside_the_log_tells_a_crash_from_a_kill(tmp_path, dump, state):
    prog = synth.generate_program(random.Random(0), 2, 5, groups=0, p2p=False)
    paths = synth.write_run(str(tmp_path), prog, trailer=False)
    with open(paths[1][: -len(".msgpack")] + ".sigterm.txt", "w") as f:
        f.write(dump)
    log = load_run(str(tmp_path)).ranks[1]
    assert log.state == state and (log.crash is not None) == (state == "crashed")


def test_killed_rank_reports_where_it_was(tmp_path):
    """A rank torchrun terminated while it computed: the SIGTERM dump's innermost user frame of
    the signalled thread (not a library's, not another thread's) reaches the diff report."""
    import sysconfig

    prog = synth.Program(2, {"0": (0, 1)}, [])
    site = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (4,)),), 0, site=site)] * 3
    paths = synth.write_run(str(tmp_path), prog, [synth.Fault("missing", 1, 2)], trailer=False)
    stdlib = sysconfig.get_paths()["stdlib"]
    dump = ("Thread 0x00007f01 (most recent call first):\n"
            '  File "/work/job/loader.py", line 77 in prefetch\n\n'
            "Current thread 0x00007f02 (most recent call first):\n"
            f'  File "{stdlib}/shutil.py", line 256 in copyfile\n'
            '  File "/work/job/train.py", line 41 in save_checkpoint\n'
            '  File "/work/job/train.py", line 90 in main\n')
    with open(paths[1][: -len(".msgpack")] + ".sigterm.txt", "w") as f:
        f.write(dump)
    run = load_run(str(tmp_path))
    assert run.ranks[1].state == "killed"
    assert run.ranks[1].dump_site == ("/work/job/train.py", 41, "save_checkpoint")
    report = analyse(run)
    assert report.first.kind == "missing" and report.first.ranks == [1]
    assert "rank 1: killed while in save_checkpoint() at train.py:41" in report.first.message
    assert "slow or stuck rank rather than a skipped call" in report.first.fix
    assert report.hang.states[1].detail == "killed while in save_checkpoint() at train.py:41"


@pytest.mark.timeout(120)
def test_wait_for_graph_counts_collective_slots_without_p2p(tmp_path):
    """Rank 0 waits in the group's first all_reduce on rank 2, which only sent a message and left:
    point-to-point ops are not slots of the group's collectives (rank 2's send must not count)."""
    from conftest import marker_lines, program, torchrun

    script = program("p2p_then_missing.py")
    rc, out, err, run_dir = torchrun(script, 3, tmp_path, timeout=100)
    assert rc != 0
    report = analyse(load_run(run_dir))
    assert report.hang.graph.has_edge(0, 2) and report.hang.graph.has_edge(1, 2), list(report.hang.graph.edges)
    assert report.hang.root_causes == [2]
    blocked = report.hang.states[1].blocked
    assert [(e.sig.op, e.position, e.site[1]) for e in blocked] == [("allreduce_", 0, marker_lines(script)["all_reduce"])]
    assert (report.first.kind, report.first.ranks) == ("missing", [2])


@pytest.mark.timeout(120)
def test_batch_p2p_waits_follow_the_unmatched_messages(tmp_path):
    """gloo's batch_isend_irecv work has no future: the timeout each waiting rank raised is tied to
    its batch, and a rank waits on a peer only for a message the peer never posted. Rank 0, which
    moved on to the all_reduce, did not issue an 'extra' collective: the others are stuck elsewhere."""
    from conftest import marker_lines, program, torchrun

    script = program("batch_ring.py")
    rc, out, err, run_dir = torchrun(script, 3, tmp_path, timeout=100)
    assert rc != 0
    report = analyse(load_run(run_dir))
    kinds = [f.kind for f in report.findings]
    assert kinds[:2] == ["unmatched_p2p", "unmatched_p2p"] and "extra" not in kinds, kinds
    edges = set(report.hang.graph.edges)
    # rank 1's recv from 0 was posted by rank 0 (no arc); its send to 2 never met a recv
    assert (1, 2) in edges and (1, 0) not in edges and (2, 0) in edges, edges
    line = marker_lines(script)["batch"]
    assert {e.site[1] for e in report.hang.states[1].blocked} == {line}
    assert report.verdict == "deadlock"
