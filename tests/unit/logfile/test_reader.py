"""The log reader (collcheck/logfile/reader.py, collcheck/logfile/scan.py) on logs written in memory: round trips,
every truncation point, damaged, foreign and mixed inputs."""

from __future__ import annotations

import json
import os
import random

import msgpack
import pytest

from collcheck.logfile import format as lf
from collcheck import synth
from collcheck.analysis.diff import analyse
from collcheck.logfile.writer import LogWriter, open_exclusive
from collcheck.model import load_run
from collcheck.logfile.reader import LogError, parse_log, read_log
from support.logbytes import format1, frames, record_ends, small_program


@pytest.fixture
def small_log(tmp_path):
    paths = synth.write_run(str(tmp_path / "run"), small_program())
    with open(paths[0], "rb") as f:
        return paths[0], f.read()


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
    """The analysis reads through collcheck.logfile.scan: it must agree with parse_log at every cut."""
    from collcheck.logfile.scan import scan_bytes

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


def test_malformed_record_is_damage(tmp_path):
    """A record that checks (CRC) but has the wrong types was not written by collcheck: it is left
    out as damage, and the note says what is wrong with it (collcheck/logfile/records.py)."""
    prog = small_program()
    paths = synth.write_run(str(tmp_path), prog)
    size = os.path.getsize(paths[0])
    with open(paths[0], "ab") as f:
        f.write(lf.frame(msgpack.packb({"k": "D", "i": "x"}), 3))
    run = load_run(str(tmp_path))
    assert run.ranks[0].damage == [[size, os.path.getsize(paths[0]), 0]]
    assert any("a 'D' record whose 'i' is not an integer" in w for w in run.warnings), run.warnings


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
    # (rank 0, killed inside #2 without SIGTERM stacks of its own, went first: ending.py)
    assert report.hang.states[1].detail == ("killed while in save_checkpoint() at train.py:41; stopped by the "
                                            "launcher (SIGTERM) after rank 0 went")
