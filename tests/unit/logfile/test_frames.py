"""The batched frame decoder (collcheck.logfile.frames) reads exactly what decoding frame by frame reads.

Frames are decoded many at a time by one msgpack decoder over their joined payloads; a frame
whose payload does not decode on its own (a CRC that checks over bytes that are not records) must
still be damage, and nothing of it may leak into its neighbours' records. The reference below
decodes each frame alone, as docs/log-format.md describes.
"""

from __future__ import annotations

import msgpack
from support import examples
from hypothesis import given, settings, strategies as st

from collcheck.logfile import frames as fr, format as lf
from collcheck.logfile.reader import LogStream

# -- frame contents -------------------------------------------------------------------------
ints = st.integers(min_value=0, max_value=2**40)
coll = st.fixed_dictionaries(
    {"k": st.just("C"), "o": st.integers(0, 9), "g": st.integers(0, 3), "ts": ints, "j": ints},
    optional={"t": st.integers(0, 9), "r": st.integers(0, 3), "s": st.integers(0, 9),
              "d": st.lists(st.tuples(st.integers(1, 5), ints, ints) | st.tuples(st.integers(1, 5), ints),
                            min_size=1, max_size=3)})
string = st.fixed_dictionaries({"k": st.just("S"), "i": st.integers(0, 99), "s": st.text(max_size=300)})
unknown = st.fixed_dictionaries({"k": st.sampled_from(["?", "Y"]), "x": ints})
record = st.one_of(coll, coll, coll, string, unknown)


@st.composite
def payloads(draw) -> bytes:
    """Mostly one collective (what the recorder writes); sometimes several records, nothing, or
    bytes that are not records (a frame that checks but is not ours)."""
    kind = draw(st.sampled_from(["one"] * 8 + ["several", "empty", "cut", "not a map", "junk"]))
    if kind == "one":
        return msgpack.packb(draw(coll))
    if kind == "several":
        return b"".join(msgpack.packb(r) for r in draw(st.lists(record, min_size=1, max_size=4)))
    if kind == "empty":
        return b""
    if kind == "cut":  # a record that goes on in the next frame's payload
        whole = msgpack.packb(draw(coll))
        return whole[:draw(st.integers(1, len(whole) - 1))]
    if kind == "not a map":
        return msgpack.packb(draw(st.lists(ints, max_size=3)))
    return bytes([0xC1]) + draw(st.binary(max_size=20))  # an undecodable byte


@st.composite
def logs(draw) -> bytes:
    """Frames numbered as the writer numbers them (C records before each), some runs longer than
    a batch or two, some with event ids beyond what the inline header parser handles."""
    eid = draw(st.sampled_from([0, 0, 2**21 - 40, 2**35]))
    out = []
    at_least = draw(st.sampled_from([0, fr.FIRST_BATCH + 1, 5 * fr.FIRST_BATCH + 10]))  # across batches
    for payload in draw(st.lists(payloads(), min_size=at_least, max_size=at_least + 40)):
        out.append(lf.frame(payload, eid))
        eid += sum(1 for r in _alone(payload) or () if r["k"] == "C")
    return b"".join(out)


def _alone(payload: bytes) -> list | None:
    """The records of one payload decoded alone (None: not records)."""
    recs = []
    while payload:
        try:
            rec, payload = msgpack.unpackb(payload, raw=False, strict_map_key=False, use_list=False), b""
        except msgpack.ExtraData as more:
            rec, payload = more.unpacked, more.extra
        except Exception:
            return None
        if type(rec) is not dict:
            return None
        recs.append(rec)
    return recs


def reference(data: bytes, expand: bool) -> tuple[list, list, int]:
    """(offset, record, event id) of every record, the damage and the frames skipped as copies
    (one that repeats a frame with the same event id), frame by frame."""
    out, damage, pos, copies, seen = [], [], 0, 0, set()
    while pos < len(data):
        start, end, eid, crc = fr.frame_at(data, pos)
        if (eid, crc) in seen:
            copies += 1
            pos = end
            continue
        seen.add((eid, crc))
        recs = _alone(data[start:end])
        if recs is None:
            damage.append([pos, end, 0])
        for rec in recs or ():
            if rec["k"] not in lf.ALL_KINDS:
                continue
            if rec["k"] == "C":
                for entry in (rec.get("d") or ()) if expand else ():
                    done = {"k": "D", "i": eid - entry[0], "r": rec["ts"] - entry[1]}
                    if len(entry) > 2:
                        done["c"] = rec["ts"] - entry[2]
                    out.append((pos, done, -1))
                out.append((pos, rec, eid))
                eid += 1
            else:
                out.append((pos, rec, -1))
        pos = end
    return out, damage, copies


@settings(max_examples=examples(50), deadline=None)
@given(logs(), st.booleans())
def test_batches_read_what_frames_read_alone(data, expand):
    stream = LogStream(data, "log", expand_done=expand)
    got = list(stream)
    want, damage, copies = reference(data, expand)
    assert got == want
    assert stream.damage == damage and not stream.torn and stream.duplicates == copies


@settings(max_examples=examples(20), deadline=None)
@given(logs(), st.data())
def test_a_reader_that_stops_early_knows_how_far_it_read(data, pick):
    """Where a caller stops (a preview of the first collectives), good_bytes is the end of the
    last frame whose records it was given in full."""
    want, _, _ = reference(data, True)
    if not want:
        return
    stop = pick.draw(st.integers(0, len(want) - 1))
    stream = LogStream(data, "log")
    for k, item in enumerate(stream):
        if k == stop:
            break
    assert item == want[stop]
    frame = want[stop][0]
    assert stream.good_bytes <= frame
    assert all(pos < stream.good_bytes for pos, _, _ in want[:stop] if pos != frame)


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.integers(1, 3), min_size=2, max_size=200), st.data())
def test_damage_counts_the_collectives_it_held(sizes, pick):
    """Frames of 1-3 collectives; some runs of frames damaged (one byte changed in each): each
    run is one damage entry counting the collectives of its frames (None: it runs to the end)."""
    out, starts, eid = [], [], 0
    for size in sizes:
        starts.append(sum(map(len, out)))
        out.append(lf.frame(b"".join(msgpack.packb({"k": "C", "o": 1, "g": 0, "ts": eid + k}) for k in range(size)), eid))
        eid += size
    hit = sorted(pick.draw(st.sets(st.integers(0, len(sizes) - 1), min_size=1, max_size=len(sizes) // 2 + 1)))
    data = bytearray(b"".join(out))
    for k in hit:
        data[starts[k] + 7] ^= 0x40  # inside the payload: the CRC no longer checks
    want, run = [], None
    for k in range(len(sizes)):
        if k in hit:
            if run is None:
                run = [starts[k], None, 0]
                want.append(run)
            run[2] += sizes[k]
        elif run is not None:
            run[1], run = starts[k], None
    if run is not None:
        run[1:] = [len(data), None]
    stream = LogStream(bytes(data), "log")
    got = [eid for _, rec, eid in stream if rec["k"] == "C"]
    assert stream.damage == want
    assert got == [e for k, size in enumerate(sizes) if k not in hit for e in range(sum(sizes[:k]), sum(sizes[:k + 1]))]


@settings(max_examples=examples(25), deadline=None)
@given(logs(), st.integers(1, 5000), st.sampled_from(["zeros", "cut frame", "garbage"]))
def test_the_end_of_a_log(data, zeros, tail):
    """What follows the last good frame: zeros alone (space reserved for frames and never
    written, left by a process that died) read as the end; a frame cut short, zeros or not after
    it, is a torn tail; anything else is damage."""
    want, damage, _ = reference(data, True)
    cut = lf.frame(msgpack.packb({"k": "C", "o": 1, "g": 0, "ts": 1, "j": 0}), 1 << 30)
    extra = {"zeros": b"", "cut frame": cut[:-3], "garbage": b"\x05not a frame"}[tail]
    stream = LogStream(data + extra + bytes(zeros), "log")
    assert list(stream) == want
    if tail == "garbage":
        assert sorted(stream.damage) == sorted(damage + [[len(data), len(data) + len(extra) + zeros, None]])
        assert not stream.torn
    else:
        assert stream.damage == damage and stream.torn == (tail == "cut frame")
