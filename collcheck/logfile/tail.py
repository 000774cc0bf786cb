"""A log's last checkpoint (logfile/checkpoint.py), found from the end of the file: a few KiB
read per rank instead of the whole log.

The end of a file is found by chaining frames: from some frame mark in the last bytes, frames
that check (CRC) follow one another to the very end (a last frame torn by a kill is left out).
The checkpoint is in one of the last frames; the records after it (completions, stacks, the
exception, the trailer) come with it. When no such chain or checkpoint is found, or a collective
follows the checkpoint, the log is read in full as before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import msgpack

from . import format as lf
from .frames import frame_at
from .reader import LogError, check_header
from .records import problem

TAIL_READS = (1 << 10, 1 << 14, 1 << 18, 1 << 21)  # bytes read from a log's end to find its last checkpoint
SHORT = 1 << 8  # the last bytes tried first: a checkpoint of a few groups and the trailer (fewer frames to check)
MAX_CANDIDATES = 256  # frame marks tried in one tail (bounds the work of a hostile tail)


@dataclass
class Tail:
    """A log's last checkpoint and what follows it: enough to know the rank's whole state when no
    collective follows it (`complete`)."""

    checkpoint: dict
    after: list  # the records after it, in order
    complete: bool  # no collective after the checkpoint, nothing damaged, nothing left unlisted

    def key(self) -> bytes:
        """What ranks of one kind share: their sequences, open and failed collectives, and how
        their logs end (record kinds, and what completions, stacks and exceptions refer to);
        packed (one call in C for each of thousands of ranks: equal keys, equal values)."""
        cp = self.checkpoint
        ending = []
        for rec in self.after:
            kind = rec.get("k")
            if kind == lf.DONE:
                ending.append((kind, rec.get("i"), "e" in rec, "c" in rec))
            elif kind in (lf.STACKS, lf.SYNC):
                ending.append((kind, rec.get("i")))
            elif kind == lf.EXCEPTION:
                ending.append((kind, rec.get("t"), rec.get("s")))
            else:
                ending.append((kind,))
        return msgpack.packb((cp["n"], cp.get("v"), cp.get("a"), cp["c"], cp.get("o", ()), cp.get("x", ()), ending))


def read_tail(path: str, end: tuple[bytes, int] | None = None) -> Tail | None:
    """The last checkpoint of a log file (its last segment's) and the records after it, from the
    end of the file; None when the end holds none that can be trusted (no checkpoint, damage, a
    format 1 log): the log is then read in full. `end`: the file's last bytes and where they
    start, read already (reader.read_ends): the file is opened only when they are not enough."""
    if end is not None:
        tail = _tail_in(end[0], end[1] == 0)
        if tail is not None or end[1] == 0:
            return tail if tail is not False else None
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            for want in TAIL_READS:
                start = max(0, size - want)
                f.seek(start)
                data = f.read(size - start)
                tail = (_tail_in if want == TAIL_READS[0] else _tail_of)(data, start == 0)
                if tail is not None or start == 0:
                    return tail if tail is not False else None
    except OSError:
        return None
    return None


def _tail_in(data: bytes, whole: bool):
    """_tail_of, tried first on the last SHORT bytes (the usual end: fewer frames to check)."""
    tail = _tail_of(data[-SHORT:], False) if len(data) > SHORT else None
    return tail if tail is not None else _tail_of(data, whole)


def tail_of(data: bytes) -> Tail | None:
    """The last checkpoint of a whole log held in memory, as read_tail."""
    tail = _tail_of(data, True)
    return tail if tail else None


def read_end(data: bytes, name: str, seen: dict | None = None) -> tuple[dict, Tail | None]:
    """A log's end held in memory (live mode's: a frame holding its header, then its last frames):
    the checked header (a LogError when it is none) and its last checkpoint as `read_tail` finds
    it. `seen`: bytes after the header -> Tail, of the ends read before (ranks of one kind send
    the same: each read once)."""
    found = frame_at(data, 0)
    records = _decode(memoryview(data)[found[0]:found[1]]) if found.__class__ is tuple else None
    if not records:
        raise LogError(f"{name}: not the end of a collcheck log (no readable header)")
    header = check_header(records[0], name)
    rest = bytes(data[found[1]:])
    seen = {} if seen is None else seen
    if rest not in seen:
        seen[rest] = tail_of(rest)
    return header, seen[rest]


def _tail_of(data: bytes, whole: bool):
    """Tail | None (no checkpoint in the frames found: read more) | False (none to be found)."""
    payloads = _frames_to_end(data)
    if payloads is None:
        return False if whole else None
    after: list = []
    for payload in reversed(payloads):  # (the checkpoint is in one of the last frames)
        records = _decode(payload)
        if records is None:
            return False
        for k in range(len(records) - 1, -1, -1):
            rec = records[k]
            if rec.get("k") == lf.CHECKPOINT:
                after = records[k + 1:] + after
                ok = _well_formed(rec) and all(map(_well_formed, after)) and not rec.get("more")
                return Tail(rec, after, ok)
        after = records + after
        if any(r.get("k") == lf.COLL for r in records):
            return False  # a collective after the last checkpoint: it does not stand for the log
    return False if whole else None


def _frames_to_end(data: bytes) -> list | None:
    """The payloads of the frames that chain from some frame mark in `data` to its very end (a
    last frame torn by a kill is left out); None when no chain reaches the end."""
    n = len(data)
    mark = bytes((lf.FRAME_MARK,))
    pos = data.find(mark)
    tries = 0
    while 0 <= pos < n and tries < MAX_CANDIDATES:
        tries += 1
        payloads = []
        p = pos
        while p < n:
            found = frame_at(data, p)
            if found is None or found == "torn":
                break
            payloads.append(memoryview(data)[found[0]:found[1]])
            p = found[1]
        if payloads and (p == n or frame_at(data, p) == "torn"):
            return payloads
        pos = data.find(mark, pos + 1)
    return None


def _decode(payload) -> list | None:
    """The records of a frame's payload; None when it does not decode into maps."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(payload), 1))
    unpacker.feed(payload)
    records = []
    try:
        for rec in unpacker:
            if rec.__class__ is not dict:
                return None
            records.append(rec)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, TypeError):
        return None
    return records


def _well_formed(rec: dict) -> bool:
    """A record of the kinds a checkpoint's ending holds, whose fields have the types the typed
    schema gives (records.problem): what `Tail.key` and the ranks that share a kind read is
    checked before any use; anything else (a collective, damage) and the log is read in full,
    where the damage is said and counted."""
    kind = rec.get("k")
    return kind.__class__ is str and kind in lf.ALL_KINDS and kind != lf.COLL and problem(rec) is None
