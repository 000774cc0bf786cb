"""Reading a log with the compiled loop (compiled.py) and the Python one (scanner.py) in turns.

The compiled loop takes runs of usual frames: collectives whose template the Python loop took
the usual way before, and registered there with its signature id (`_register`), each in a
frame of its own or after records the Python loop only appends to lists of their own (`_sides`).
Whatever it does not take (the header, interning and group records, a template's first collective, damage,
copies, a value of another type) the frame reader (frames.next_frame) and the Python loop take,
one frame at a time, with everything they do for it; then the compiled loop goes on. A batch
is added to the scan's columns at once (`_add`) as the Python loop would have added each of its
collectives: the same columns, runs, completions, times. When the Python loop's keys change
(`Scanner.changed`), the templates they stood for are forgotten, so the compiled loop never
takes a collective the Python loop would have taken another way."""

from __future__ import annotations

import msgpack
import numpy as np

from .compiled import ABSENT, BATCH, Batch, pointer_to
from .decode import Decoder
from .frames import checked, next_frame

_INT64 = (-(1 << 63), 1 << 63)


def read_compiled(scanner, stream, limit: int | None, lib) -> None:
    """scanner.Scanner.read with the compiled loop (`lib`): the same scan."""
    scan, data = scanner.scan, stream.data
    pointer, keep = pointer_to(data)
    batch = Batch(lib, min(BATCH, len(data) // 24 + 1))  # (a collective's frame: 24 bytes at least)
    stream.expect, stream.last_eid, stream.recent = 0, -1, []  # (frames.read_frames' start at 0)
    pos, size = 0, len(data)
    while pos < size:
        left = None if limit is None else limit - len(scan.sig)
        out = batch.scan(pointer, size, pos, stream.last_eid, left if left is not None else 1 << 62)
        if out.n:
            _add(scanner, batch, out)
            _sides(scanner, stream, batch, out.ns)
            stream.last_eid, stream.recent = out.last_eid, [out.last_crc]
            stream.expect = max(stream.expect, out.last_eid + 1)
            stream.colls = stream.expect
            stream.good_bytes = pos = out.stop
            if limit is not None and len(scan.sig) >= limit:
                # (as the frame reader's generator, closed at the last record: the frames before it)
                stream.good_bytes = int(batch.cols["off"][out.n - 1])
                stream.expect = stream.colls = max(stream.expect - 1, 0)
                scan.partial = True
                return
        if pos >= size:
            break
        before = stream.good_bytes, stream.expect, stream.colls
        records, pos = next_frame(stream, pos)
        if records:
            scanner.consume(Decoder(records, scanner.tables), stream.path, limit)
            if scan.partial:
                stream.good_bytes, stream.expect, stream.colls = before
                return
            _sync(scanner, batch, records)
    del keep


def _sides(scanner, stream, batch: Batch, ns: int) -> None:
    """The records the batch's frames held before their collectives (compiled.SIDE_KINDS), read
    as the frame reader and the Python loop read them: after the collectives, which they do not
    touch, in their order."""
    cols, data, options = batch.cols, stream.data, stream.decoder_options
    for s, e, at, end in zip(*(cols[k][:ns].tolist() for k in ("sstart", "send", "sframe", "sframe_end"))):
        rec = msgpack.unpackb(data[s:e], **options)
        if checked(stream, rec, at, end):
            scanner.consume(((at, rec, -1),), stream.path, None)


def _sync(scanner, batch: Batch, records: list) -> None:
    """What the Python loop learned from a frame, told to the compiled one: templates whose keys
    changed forgotten, new group slots, the collectives it took the usual way as templates."""
    for key in scanner.changed:
        fields = None if key is None else _ints(key)
        if fields is None:
            batch.forget_all()
        else:
            batch.forget(fields)
    scanner.changed.clear()
    for gid, slot in scanner.new_slots:
        if gid.__class__ is int:
            batch.set_group(gid, slot)
    scanner.new_slots.clear()
    for _, rec, eid in records:
        if eid >= 0:
            _register(scanner, batch, rec)


def _register(scanner, batch: Batch, rec: dict) -> None:
    """A collective's template, when the Python loop would take the next one like it the usual
    way, with the signature id it would give."""
    hit = scanner.usual(rec)
    if hit is None:
        return
    get = rec.get
    fields = _ints((get("o"), get("t"), get("r"), get("p"), get("s"), get("ch"), get("u"), get("l"), get("a"),
                    get("n"), get("x")))
    if fields is not None:
        batch.add_template(fields + (hit[1],), hit[0])


def _ints(key: tuple) -> tuple | None:
    """A key's fields as the compiled loop has them (None: absent or nil, a bool as its int); None
    when one is of another kind (it never takes such a collective)."""
    out = []
    for v in key:
        if v is None:
            out.append(ABSENT)
        elif (v.__class__ is int or v.__class__ is bool) and _INT64[0] < v < _INT64[1]:
            out.append(int(v))
        else:
            return None
    return tuple(out)


def _add(scanner, batch: Batch, out) -> None:
    """The batch's collectives added to the scan's columns, as the Python loop adds each."""
    scan, k, cols = scanner.scan, out.n, batch.cols
    n0 = len(scan.sig)
    runs = scan.eid_runs
    if runs[-1][1] < 0:
        runs[-1] = (0, out.eid0)  # the first collective after deleted segments
    elif out.eid0 != runs[-1][1] + n0 - runs[-1][0]:
        runs.append((n0, out.eid0))
    run_n = runs[-1][0]
    sid, slot = cols["sid"][:k], cols["slot"][:k]
    done = _completions(scanner, cols, out.nd, n0, run_n, out.eid0)
    scan.sig.frombytes(sid.astype(np.uint32).tobytes())
    scan.gid.frombytes(slot.astype(np.uint16 if scan.gid.typecode == "H" else np.uint32).tobytes())
    scan.off.frombytes(cols["off"][:k].astype(np.uint64).tobytes())
    scan.chain.frombytes(cols["chain"][:k].tobytes())
    if scanner.keep_seq:
        scan.seq.frombytes(cols["j"][:k].astype(np.uint64).tobytes())
    scanner.completed.extend(bytes(k))
    for i in _where(sid, scanner.a2a_sizes):
        scan.a2a[n0 + i] = scanner.a2a_sizes[int(sid[i])]
    times = scan.times
    if times is not None:
        times.issued.frombytes(cols["ts"][:k].tobytes())
        times.site.frombytes(cols["site"][:k].tobytes())
        times.flags.extend(cols["flags"][:k].tobytes())
        times.done.frombytes(bytes(8 * k))
        times.timed.extend(bytes(k))
        tensors = cols["t"][:k]
        for i in _where(sid, scanner.shape_free):
            t = int(tensors[i])
            times.tensors[n0 + i] = None if t == ABSENT else t
    if done is not None:
        _apply(scanner, *done)


def _where(sid: np.ndarray, ids) -> list[int]:
    """The positions of the batch whose signature id is among `ids`."""
    if not ids:
        return []
    return np.flatnonzero(np.isin(sid, np.fromiter(ids, dtype=np.int64))).tolist()


def _completions(scanner, cols: dict, nd: int, n0: int, run_n: int, eid0: int):
    """(events completed in order, whether each was only returned, its completion time) of the
    batch's `d` entries, None: none. An entry's event is found in the current run by position,
    before it through the scan's runs (as the Python loop, before the batch is added)."""
    if not nd:
        return None
    rec = cols["drec"][:nd].astype(np.int64)
    back = cols["dback"][:nd]
    at = n0 + rec  # each entry's collective
    target = at - back
    found = (target >= run_n) & (target < at)
    for e in np.flatnonzero(target < run_n).tolist():  # (rare: an event of an earlier run)
        i = scanner.scan.event_of(eid0 + int(rec[e]) - int(back[e]))
        if i is not None:
            target[e], found[e] = i, True
    ts = cols["ts"][rec[found]]
    return target[found], cols["dlen"][:nd][found] == 2, ts - cols["dlast"][:nd][found]


def _apply(scanner, target: np.ndarray, returned: np.ndarray, when: np.ndarray) -> None:
    """Completions: each event completed; those only returned unconfirmed; the first time read
    of each its completion time (`Scanner._done_time`)."""
    scan = scanner.scan
    completed = np.frombuffer(scanner.completed, dtype=np.uint8)
    completed[target] = 1
    del completed
    scan.unconfirmed.extend(target[returned].tolist())
    times = scan.times
    if times is None:
        return
    first, where = np.unique(target, return_index=True)
    timed = np.frombuffer(times.timed, dtype=np.uint8)
    new = timed[first] == 0
    first, where = first[new], where[new]
    timed[first] = 1
    del timed
    done = np.frombuffer(times.done, dtype=np.int64)
    done[first] = when[where]
    del done
