"""Test helpers for the log format: a small synthetic program, and a decoder of format 2's frames
written from docs/log-format.md (independent of collcheck's reader, so the two check each other)."""

from __future__ import annotations

import dataclasses
import zlib

import msgpack

from collcheck import synth
from collcheck.logfile import compiled
from collcheck.logfile.scan import scan_bytes


def small_program(world=2):
    prog = synth.Program(world, {"0": tuple(range(world))}, [])
    a, b = prog.add_site(), prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=a),
                synth.Op("broadcast_", "0", (("bfloat16", (2, 3)),), root=1, site=b),
                synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=a)]
    return prog


def unpack(data: bytes):
    u = msgpack.Unpacker(raw=False, strict_map_key=False)
    u.feed(data)
    return list(u)


def varint(data: bytes, pos: int) -> tuple[int, int]:
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
        length, p = varint(data, pos + 5)
        eid, p = varint(data, p)
        end = p + length
        assert zlib.crc32(data[pos + 5:end]) == int.from_bytes(data[pos + 1:pos + 5], "little"), pos
        recs = []
        for rec in unpack(data[p:end]):  # completions a C record carries are D records
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


BAD_INPUTS = ["empty-dir", "missing-dir", "zero-bytes", "corrupt", "unknown-version"]
# two launches in one folder: a launch each for diff, stats, tui and export (docs/diff.md), not one run
SEVERAL_LAUNCHES = ["two-runs", "same-rank-twice"]


def bad_input(tmp_path, case: str):
    """A run directory that is wrong in one way (BAD_INPUTS): the CLI must say so in one line, exit 2;
    or a folder of two launches (SEVERAL_LAUNCHES)."""
    import random

    from collcheck.logfile import format as lf

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


def frames_of(data: bytes) -> list[tuple[list, int]]:
    """A log's frames as (records, collectives before), to change and `pack` again (collcheck's
    frame reader finds them: the log must be whole)."""
    from collcheck.logfile import frames as fr

    out, pos = [], 0
    while pos < len(data):
        start, end, eid, _ = fr.frame_at(data, pos)
        out.append((unpack(data[start:end]), eid))
        pos = end
    return out


def pack(frames: list) -> bytes:
    from collcheck.logfile import format as lf

    return b"".join(lf.frame(b"".join(msgpack.packb(r) for r in recs), eid) for recs, eid in frames)


# -- the compiled log reader against the Python loop ---------------------------------------------

def both(data: bytes, **kw):
    """(the compiled reader's scan, the Python loop's scan) of `data`, or their errors' texts."""
    out = []
    for lib in (compiled.library(), None):
        saved = compiled._LIB[:]
        compiled._LIB[:] = [lib]
        try:
            out.append(scan_bytes(data, "log", **kw))
        except Exception as exc:  # noqa: BLE001 (the two must fail alike: LogError, with the same text)
            out.append(f"{type(exc).__name__}: {exc}")
        finally:
            compiled._LIB[:] = saved
    return out


def fields(scan) -> dict:
    """Everything a scan holds, for comparing two (the tables object compared by its contents)."""
    if isinstance(scan, str):
        return {"error": scan}
    out = {f.name: getattr(scan, f.name) for f in dataclasses.fields(scan) if f.name not in ("tables", "times")}
    if scan.times is not None:
        out["times"] = dataclasses.asdict(scan.times)
    if scan.tables is not None:
        out["tables"] = (scan.tables.strings, scan.tables.sites, scan.tables.tspecs)
    return out


def assert_same(data: bytes, **kw) -> None:
    a, b = both(data, **kw)
    fa, fb = fields(a), fields(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        assert fa[key] == fb[key], key
