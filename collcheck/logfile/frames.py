"""Format 2 frames of a log's bytes: find the ones that check, skip damage and copies, decode
their records.

Frames are decoded in batches: the payloads of up to a few thousand good frames are joined and
read by one msgpack decoder, and each record is placed in its frame by the decoder's position.
Decoding frame by frame costs three times as much per collective (a decoder per frame), which
is what a long log's load time is made of. A frame whose payload does not decode on its own (a
CRC that checks on bytes that are not ours) falls back to the frame-by-frame path.

Every record is checked against the schema (logfile/records.py) before it is yielded: one that fails is
left out, and its frame is damage (`malformed` says why), as a frame whose CRC fails is. (The
scanner checks collectives itself, faster: `LogStream(check_colls=False)`.)

The functions here keep their state on the reader's `LogStream`, whose constructor declares it
all: what callers read (damage, malformed, torn, duplicates, good_bytes, colls) and where the
frame reader is (expect, last_eid, recent).
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect

import msgpack

from . import format as lf
from .records import coll_problem, completions_checked, problem

_CRC = struct.Struct("<I").unpack_from
_MARK = bytes((lf.FRAME_MARK,))
READ_ERRORS = (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError)
FIRST_BATCH, MAX_BATCH = 32, 4096  # frames per batch: small first (a reader after one record)


def frame_at(data: bytes, pos: int, n: int | None = None):
    """(payload start, payload end, collectives before, crc) of a frame that checks at `pos`;
    'torn' when its length runs past the end of the data (or `n`); None when it does not check."""
    header = _frame_header(data, pos, len(data) if n is None else n)
    if header.__class__ is not tuple:
        return header
    p, end, eid = header
    crc = _CRC(data, pos + 1)[0]
    if zlib.crc32(memoryview(data)[pos + 5:end]) != crc:
        return None
    return p, end, eid, crc


def _frame_header(data: bytes, pos: int, n: int):
    """(payload start, payload end, collectives before) as the frame header at `pos` says, without
    checking its CRC; 'torn' or None as frame_at."""
    if data[pos] != lf.FRAME_MARK:
        return None
    p = pos + 5
    fields = [0, 0]
    for k in (0, 1):  # payload length, collectives before: LEB128 (logformat.uvarint)
        value = shift = 0
        while True:
            if p >= n:
                return "torn"
            b = data[p]
            p += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift > 63:
                return None
        fields[k] = value
    length, eid = fields
    if length > lf.MAX_FRAME:
        return None
    end = p + length
    if end > n:
        return "torn"
    return p, end, eid


CRC_BUDGET = 4  # bytes a file's resyncs may check with CRCs, per byte of the file (plus MAX_FRAME)


def _candidate(stream, pos: int):
    """frame_at, within the file's CRC budget (`stream.crc_left`; see resync)."""
    data = stream.data
    header = _frame_header(data, pos, len(data))
    if header.__class__ is not tuple:
        return header
    p, end, eid = header
    if stream.crc_left < 0:
        nxt = data.find(_MARK, pos + 1)
        if 0 <= nxt < end:
            return None  # past the budget: a claimed frame that holds a later mark is passed over
    stream.crc_left -= end - pos
    crc = _CRC(data, pos + 1)[0]
    if zlib.crc32(memoryview(data)[pos + 5:end]) != crc:
        return None
    return p, end, eid, crc


def resync(stream, pos: int):
    """(position, frame) of the next frame that checks from `pos` on, or None.

    Every 0xC1 byte is a candidate, and each claims a length of up to MAX_FRAME: checking each
    one's CRC makes a file of marks quadratic (a megabyte of them took minutes). So the CRC work
    of a file's damage is bounded (`stream.crc_left`, CRC_BUDGET times its size); past it, a
    candidate whose claimed frame holds a later candidate is passed over without a CRC, which
    makes the frames checked disjoint: at most the file's size more. A good frame that holds a
    0xC1 byte (in an int) may then be passed over, right after damage only: recovery goes on at
    the next frame."""
    find = stream.data.find
    pos = find(_MARK, pos)
    while pos >= 0:
        f = _candidate(stream, pos)
        if f.__class__ is tuple:
            return pos, f
        pos = find(_MARK, pos + 1)
    return None


def read_frames(stream, pos: int):
    """Every record of the frames from `pos` on, as (frame offset, record, event id): the event
    id of a C record, else -1. Completions a C record carries (`d`) come first, as D records
    (unless the stream's `expand_done` is off: then the reader handles `d` itself)."""
    stream.expect = 0 if pos == 0 else -1  # (format 1's header first: the count is not known)
    stream.last_eid, stream.recent = -1, []
    batch = 1 if stream.header_only else FIRST_BATCH
    while pos < len(stream.data):
        frames, pos = _walk(stream, pos, batch)
        yield from decode_frames(stream, frames)
        if stream.header_only:
            return
        batch = min(batch * 4, MAX_BATCH)


def next_frame(stream, pos: int) -> tuple[list, int]:
    """The records of the next frame that checks from `pos` on (damage and copies before it noted
    on the stream, as read_frames does), and where the frame after it starts: the compiled loop's
    way back to this reader for a frame it does not take (logfile/fastscan.py)."""
    frames, pos = _walk(stream, pos, 1)
    return list(decode_frames(stream, frames)), pos


def decode_frames(stream, frames: list):
    """The records of `frames` (from _walk): one decoder for them all, a new one after a frame
    that is odd."""
    while frames:
        i = yield from _decode_joined(stream, frames)
        if i is None:
            break
        yield from _decode_alone(stream, frames[i])
        frames = frames[i + 1:]


def _walk(stream, pos: int, budget: int) -> tuple[list, int]:
    """Up to `budget` frames that check, from `pos`: [(offset, payload start, payload end,
    event id, the damage entry just before it or None)], and where to go on. Damage and copies
    are noted on the stream."""
    data = stream.data
    n = len(data)
    frames: list = []
    append = frames.append
    last = None  # the damage entry the next good frame follows
    last_eid, recent = stream.last_eid, stream.recent
    crc32, crc_at, view, mark = zlib.crc32, _CRC, memoryview(data), lf.FRAME_MARK
    while pos < n and len(frames) < budget:
        f = None
        if data[pos] == mark and pos + 9 < n and data[pos + 5] < 0x80:
            # the usual frame: a short payload (one collective), an event id under 2**21
            length, b0, b1, b2 = data[pos + 5], data[pos + 6], data[pos + 7], data[pos + 8]
            if b0 < 0x80:
                eid, p = b0, pos + 7
            elif b1 < 0x80:
                eid, p = (b0 & 0x7F) | b1 << 7, pos + 8
            elif b2 < 0x80:
                eid, p = (b0 & 0x7F) | (b1 & 0x7F) << 7 | b2 << 14, pos + 9
            else:
                p = n  # (the general parser below)
            end = p + length
            if end < n or end == n > p:
                crc = crc_at(data, pos + 1)[0]
                if crc32(view[pos + 5:end]) == crc:
                    f = (p, end, eid, crc)
        if f is None:
            f = _candidate(stream, pos)
            if f.__class__ is not tuple:
                found = resync(stream, pos + 1)
                if found is None:
                    _tail(stream, data, pos, f)
                    pos = n
                    break
                last = [pos, found[0], 0]
                stream.damage.append(last)
                pos, f = found
        pstart, pend, eid, crc = f
        # a copy of an earlier frame: its event id goes backwards, or it repeats a frame with the
        # same event id (the frames of no collective between two collectives)
        if eid <= last_eid and (eid < last_eid or crc in recent):
            stream.duplicates += 1
            pos = pend
            continue
        if eid > last_eid:
            recent = [crc]
        else:
            recent.append(crc)
        append((pos, pstart, pend, eid, last))
        last_eid, last = eid, None
        pos = pend
    stream.last_eid, stream.recent = last_eid, recent
    return frames, pos


def _tail(stream, data: bytes, pos: int, found) -> None:
    """The bytes after the last good frame: zeros are space the writer reserved and never wrote
    (the compiled path maps the file ahead; a crash leaves them), a frame cut short before them
    is a torn tail (the process died while writing it), anything else is damage."""
    end = _content_end(data, pos)
    if end == pos:
        return
    if found == "torn" or frame_at(data, pos, end) == "torn":
        stream.torn = True
    else:
        stream.damage.append([pos, len(data), None])


def _content_end(data: bytes, pos: int) -> int:
    """Where the bytes from `pos` on end but for trailing zeros (read backwards in chunks: no copy
    of the file's tail)."""
    end = len(data)
    while end > pos:
        start = max(pos, end - 65536)
        rest = data[start:end].rstrip(b"\0")
        if rest:
            return start + len(rest)
        end = start
    return pos


def _decode_alone(stream, frame: tuple):
    """The records of a frame whose payload does not decode as part of a batch (damage, if it
    does not decode at all)."""
    pos, ps, pe, eid, _ = frame
    recs = _payload(stream.decoder_options, stream.data[ps:pe])
    if recs is None:  # the CRC checks but the content does not decode: not ours
        stream.damage.append([pos, pe, 0])
        return
    out, eid = _emit(stream, recs, pos, pe, eid)
    yield from out
    stream.expect = stream.colls = max(stream.expect, eid)
    stream.good_bytes = pe


def _decode_joined(stream, frames: list):
    """Yields the records of `frames` up to the first that does not decode on its own, and
    returns its index (None: all decoded).

    One decoder reads the joined payloads (a decoder per frame costs three times as much); each
    record is placed in its frame by the decoder's position."""
    data, expand, check = stream.data, stream.expand_done, not stream.header_only
    check_colls = check and stream.check_colls
    count = len(frames)
    buf = b"".join([data[s:e] for _, s, e, _, _ in frames])
    unpacker = msgpack.Unpacker(max_buffer_size=max(len(buf), 1), **stream.decoder_options)
    unpacker.feed(buf)
    tell, coll = unpacker.tell, lf.COLL
    i, held = 0, []  # frame i's records read so far, when it has more than one
    pos, ps, pe, eid, after = frames[0]
    end = pe - ps  # where frame i's payload ends in buf
    expect, good = stream.expect, stream.good_bytes
    try:
        for rec in (unpacker if end else ()):
            at = tell()
            if at > end or rec.__class__ is not dict:
                return i  # frame i does not decode on its own
            if at < end:
                held.append(rec)
                continue
            if after is not None and eid > expect >= 0:
                after[2] += eid - expect  # collectives that were in the damaged bytes
            if held:
                held.append(rec)
                out, eid = _emit(stream, held, pos, pe, eid)
                held = []
                yield from out
            elif rec.get("k") == coll:  # the usual frame: one collective
                if not check_colls or _coll_checked(stream, rec, pos, pe):
                    done = rec.get("d") if expand else None
                    if done:
                        yield from _completions(done, pos, eid, rec.get("ts"), check_colls)
                    yield pos, rec, eid
                eid += 1
            elif _known(rec) and (not check or checked(stream, rec, pos, pe)):
                yield pos, rec, -1  # (unknown kinds, of later minor versions, are left out)
            if eid > expect:
                expect = eid
            good = pe
            i += 1
            while i < count:
                pos, ps, pe, eid, after = frames[i]
                if pe > ps:
                    end += pe - ps
                    break
                good = pe  # an empty frame
                i += 1
            else:
                return None
    except READ_ERRORS:
        pass
    finally:  # (also when the reader stops early)
        stream.expect = expect
        if expect >= 0:
            stream.colls = expect
        stream.good_bytes = good
    return i  # frame i's payload ends inside a record, or does not decode


def _emit(stream, recs: list, pos: int, end: int, eid: int) -> tuple[list, int]:
    """What a frame of several records yields, and the event id after it."""
    out = []
    check = not stream.header_only
    for rec in recs:
        if not _known(rec):
            continue
        if rec["k"] == lf.COLL:
            if check and stream.check_colls and not _coll_checked(stream, rec, pos, end):
                eid += 1
                continue
            done = rec.get("d") if stream.expand_done else None
            if done:
                out += _completions(done, pos, eid, rec.get("ts"), check and stream.check_colls)
            out.append((pos, rec, eid))
            eid += 1
        elif not check or checked(stream, rec, pos, end):
            out.append((pos, rec, -1))
    return out, eid


def _known(rec: dict) -> bool:
    """A record of a kind this reader knows (later minor versions may add kinds: left out)."""
    kind = rec.get("k")
    return kind.__class__ is str and kind in lf.ALL_KINDS


def _coll_checked(stream, rec: dict, pos: int, end: int) -> bool:
    """Whether a collective matches the schema (its signature's fields are the scanner's)."""
    why = coll_problem(rec, stream.world)
    if why is not None:
        malformed(stream, pos, end, 1, why)
    return why is None


def checked(stream, rec: dict, pos: int, end: int) -> bool:
    """Whether a record (not a collective) matches the schema; one that does not is damage. The
    first header sets the world size that bounds the ranks of the records after it."""
    why = problem(rec, stream.world)
    if why is not None:
        malformed(stream, pos, end, 0, why)
        return False
    if rec["k"] == lf.HEADER and not stream.world_known:
        stream.world, stream.world_known = rec["world"], True
    return True


def malformed(stream, pos: int, end: int, colls: int, why: str) -> None:
    """A record that does not match the schema, in the frame (or format 1 record) at pos..end,
    holding `colls` collectives: left out, and its bytes are damage, said with the first reason
    (`stream.malformed`: damage start -> why). Frames in a row make one entry."""
    damage = stream.damage
    k = bisect(damage, pos, key=lambda d: d[0])
    before = damage[k - 1] if k else None
    if before is not None and before[0] == pos:  # another record of the same frame
        before[2] = None if before[2] is None else before[2] + colls
        return
    if before is not None and before[1] == pos and before[2] is not None and before[0] in stream.malformed:
        before[1], before[2] = end, before[2] + colls
        return
    damage.insert(k, [pos, end, colls])
    stream.malformed[pos] = why


def _completions(done: list, pos: int, eid: int, ts: int | None, checked: bool = True) -> list:
    """D records of the completions a C record carries: [event ids back, ts - return time,
    ts - completion time (absent: not known)]. For a collective not checked here (the scanner
    checked it), those up to one that does not match the schema: never more than the scanner
    applied."""
    if not checked:
        done = completions_checked(done, ts)
    ts = ts or 0
    out = []
    for entry in done:
        d = {"k": "D", "i": eid - entry[0], "r": ts - entry[1]}
        if len(entry) > 2:
            d["c"] = ts - entry[2]
        out.append((pos, d, -1))
    return out


def _payload(options: dict, buf: bytes) -> list | None:
    """The records of one frame, or None."""
    recs = []
    while buf:
        try:
            rec, buf = msgpack.unpackb(buf, **options), b""
        except msgpack.ExtraData as more:
            rec, buf = more.unpacked, more.extra
        except (*READ_ERRORS, msgpack.OutOfData):
            return None
        if rec.__class__ is not dict:
            return None
        recs.append(rec)
    return recs
