"""Format 2 frames of a log's bytes: find the ones that check, skip damage and copies, decode
their records.

Frames are decoded in batches: the payloads of up to a few thousand good frames are joined and
read by one msgpack decoder, and each record is placed in its frame by the decoder's position.
Decoding frame by frame costs three times as much per collective (a decoder per frame), which
is what a long log's load time is made of. A frame whose payload does not decode on its own (a
CRC that checks on bytes that are not ours) falls back to the frame-by-frame path.

The functions here keep their state on the reader's `LogStream` (damage, torn, duplicates,
good_bytes, colls), which is what callers read.
"""

from __future__ import annotations

import struct
import zlib

import msgpack

from . import logformat as lf

_CRC = struct.Struct("<I").unpack_from
READ_ERRORS = (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError)
FIRST_BATCH, MAX_BATCH = 32, 4096  # frames per batch: small first (a reader after one record)


def frame_at(data: bytes, pos: int):
    """(payload start, payload end, collectives before, crc) of a frame that checks at `pos`;
    'torn' when its length runs past the end of the data; None when it does not check."""
    if data[pos] != lf.FRAME_MARK:
        return None
    n = len(data)
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
    crc = _CRC(data, pos + 1)[0]
    if zlib.crc32(memoryview(data)[pos + 5:end]) != crc:
        return None
    return p, end, eid, crc


def resync(data: bytes, pos: int) -> int | None:
    """The next position where a frame checks."""
    mark = bytes((lf.FRAME_MARK,))
    while True:
        pos = data.find(mark, pos)
        if pos < 0:
            return None
        if frame_at(data, pos).__class__ is tuple:
            return pos
        pos += 1


def read_frames(stream, pos: int):
    """Every record of the frames from `pos` on, as (frame offset, record, event id): the event
    id of a C record, else -1. Completions a C record carries (`d`) come first, as D records
    (unless the stream's `expand_done` is off: then the reader handles `d` itself)."""
    stream.expect = 0 if pos == 0 else -1  # collectives before the next frame, as far as known
    stream.last_eid = -1  # the event id of the last good frame
    stream.recent = []  # CRCs of the good frames with that event id: a duplicated chunk repeats one
    batch = 1 if stream.header_only else FIRST_BATCH
    while pos < len(stream.data):
        frames, pos = _walk(stream, pos, batch)
        while frames:  # one decoder for the batch, a new one after a frame that is odd
            i = yield from _decode_joined(stream, frames)
            if i is None:
                break
            yield from _decode_alone(stream, frames[i])
            frames = frames[i + 1:]
        if stream.header_only:
            return
        batch = min(batch * 4, MAX_BATCH)


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
            f = frame_at(data, pos)
            if f.__class__ is not tuple:
                nxt = resync(data, pos + 1)
                if nxt is None:
                    _tail(stream, data, pos, f)
                    pos = n
                    break
                last = [pos, nxt, 0]
                stream.damage.append(last)
                pos = nxt
                continue
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
    end = pos + len(data[pos:].rstrip(b"\0"))
    if end == pos:
        return
    if found == "torn" or frame_at(data[:end], pos) == "torn":
        stream.torn = True
    else:
        stream.damage.append([pos, len(data), None])


def _decode_alone(stream, frame: tuple):
    """The records of a frame whose payload does not decode as part of a batch (damage, if it
    does not decode at all)."""
    pos, ps, pe, eid, _ = frame
    recs = _payload(stream.decoder_options, stream.data[ps:pe])
    if recs is None:  # the CRC checks but the content does not decode: not ours
        stream.damage.append([pos, pe, 0])
        return
    out, eid = _emit(recs, pos, eid, stream.expand_done)
    yield from out
    stream.expect = stream.colls = max(stream.expect, eid)
    stream.good_bytes = pe


def _decode_joined(stream, frames: list):
    """Yields the records of `frames` up to the first that does not decode on its own, and
    returns its index (None: all decoded).

    One decoder reads the joined payloads (a decoder per frame costs three times as much); each
    record is placed in its frame by the decoder's position."""
    data, expand = stream.data, stream.expand_done
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
                out, eid = _emit(held, pos, eid, expand)
                held = []
                yield from out
            elif rec.get("k") == coll:  # the usual frame: one collective
                done = rec.get("d") if expand else None
                if done:
                    yield from _completions(done, pos, eid, rec.get("ts", 0))
                yield pos, rec, eid
                eid += 1
            elif rec.get("k") in lf.ALL_KINDS:  # unknown kinds (later minor versions) are left out
                yield pos, rec, -1
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


def _emit(recs: list, pos: int, eid: int, expand: bool) -> tuple[list, int]:
    """What a frame of several records yields, and the event id after it."""
    out = []
    for rec in recs:
        kind = rec.get("k")
        if kind == lf.COLL:
            done = rec.get("d") if expand else None
            if done:
                out += _completions(done, pos, eid, rec.get("ts", 0))
            out.append((pos, rec, eid))
            eid += 1
        elif kind in lf.ALL_KINDS:
            out.append((pos, rec, -1))
    return out, eid


def _completions(done: list, pos: int, eid: int, ts: int) -> list:
    """D records of the completions a C record carries: [event ids back, ts - return time,
    ts - completion time (absent: not known)]."""
    out = []
    for entry in done:
        d = {"k": "D", "i": eid - entry[0], "r": ts - entry[1]}
        if len(entry) > 2:
            d["c"] = ts - entry[2]
        out.append((pos, d, -1))
    return out


def _payload(options: dict, buf: bytes) -> list | None:
    """The records of one frame (unknown kinds left out: later minor versions), or None."""
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
        if rec.get("k") in lf.ALL_KINDS:
            recs.append(rec)
    return recs
