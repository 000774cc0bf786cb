"""Many logs' summaries (each log's header and last checkpoint: what loading a run by kinds reads
of every log) from one call of the compiled pass (native/ends.c, in compiled.py's library).

The pass reads each file's first and last bytes as reader.read_ends does, and says whether its
header and its tail are usual: found where reader._header_of and tail._tail_in find them, every
record concerned of plain values, each key of the right type and range (records.SCHEMA, given to
it key by key from `records.described`). Those are decoded here as the Python reader decodes
them, without the checks the pass made (a quarter and a third of a log's summary in Python); the
others are left to the Python reader (model/load.py's `_summary`), given the bytes read: it finds
the same, or says what is wrong. None where there is no compiled pass (COLLCHECK_READER=python,
no compiler): the Python reader reads alone."""

from __future__ import annotations

import ctypes
import os
import threading

import msgpack
import numpy as np

from . import compiled
from . import format as lf
from .reader import HEAD
from .records import MAX_WORLD, SCHEMA, described, known_header
from .tail import TAIL_READS, Tail

__all__ = ["compiled_summaries", "read_summaries"]

MAX_PARTS = 8  # ends.c's: payloads from the checkpoint's to the end
_CODES = {"int": 1, "str": 2, "seconds": 3, "list": 4, "sequence": 5}
_OTHER = 6  # a check the pass does not make: a record with that key is the Python reader's
_INT64, _UINT64 = 1 << 63, 1 << 64


# ls_end: what the pass found of one log (offsets in its bytes), a row of int64 (numpy's: a row
# read as a list at once costs less than a ctypes structure's fields one by one)
FIELDS = ("read", "head_len", "tail_start", "tail_len", "header", "hdr_at", "hdr_end", "tail", "nparts", "records")
ROW = len(FIELDS) + 2 * MAX_PARTS


def _rule(what: tuple | None) -> tuple:
    """(code, lo, max) of a described check: ints from lo to max, both included."""
    if what is None:
        return _OTHER, 0, 0
    if what[0] != "int":
        return _CODES[what[0]], 0, 0
    lo, hi = what[1], what[2]
    return (_CODES["int"], lo, hi - 1) if -_INT64 <= lo < hi <= _UINT64 else (_OTHER, 0, 0)


def _new_state(lib):
    """The pass's state: the schema's kinds and keys, once per process; None if one does not fit."""
    state = lib.ls_ends_new(lf.FORMAT_VERSION, MAX_WORLD, lf.MAGIC.encode())
    if not state:
        return None
    ok = True
    for kind, (checks, required) in SCHEMA.items():
        assert set(required) <= set(checks), kind
        ok = ok and lib.ls_ends_rule(state, kind.encode(), b"", 0, 0, 0, 0, 0, 0, 0, 0)
        for key, check in checks.items():
            what = described(check)
            code, lo, most_value = _rule(what)
            item, ilo, imax, most = 0, 0, 0, 0
            if what is not None and what[0] == "list":
                (item, ilo, imax), most = _rule(what[1]), what[2]
                if item == _OTHER:
                    code = _OTHER
            ok = ok and lib.ls_ends_rule(state, kind.encode(), key.encode(), code, lo, most_value, most, item,
                                         ilo, imax, key in required)
    if not ok:
        lib.ls_ends_free(state)
        return None
    return state


_STATE: list = []  # [(library, state) or None], once per process
_MADE = threading.Lock()  # (threads of one process read at once)


def _pass():
    with _MADE:
        if not _STATE:
            lib = compiled.library()
            state = _new_state(lib) if lib is not None and hasattr(lib, "ls_ends") else None
            _STATE.append((lib, state) if state else None)
    return _STATE[0]


def compiled_summaries() -> bool:
    """Whether there is a compiled pass (read_summaries answers None where not)."""
    return _pass() is not None


def read_summaries(paths: list[str]) -> list | None:
    """[(ends, header, tail)] of each path: its header (as read_header checks and keeps it) and
    its last checkpoint (a complete Tail) where the pass found them usual, else None (the Python
    reader's), and then the bytes it read as reader.read_ends gives them (None: not read, or not
    needed). None when there is no compiled pass."""
    found = _pass()
    if found is None or not paths:
        return None if found is None else []
    lib, state = found
    head_cap, tail_cap = HEAD, TAIL_READS[0]
    names = [os.fsencode(p) for p in paths]
    names = (ctypes.c_char_p * len(paths))(*[b"" if b"\0" in name else name for name in names])  # ("": not read)
    buf = bytearray(len(paths) * (head_cap + tail_cap))
    out = np.zeros((len(paths), ROW), dtype=np.int64)
    lib.ls_ends(state, names, len(paths), (ctypes.c_char * len(buf)).from_buffer(buf), head_cap, tail_cap,
                out.ctypes.data)
    view = memoryview(buf)
    done = []
    for k, (read, head_len, tail_start, tail_len, usual_header, hdr_at, hdr_end, usual_tail, nparts, records,
            *parts) in enumerate(out.tolist()):
        if not read:
            done.append((None, None, None))
            continue
        base = k * (head_cap + tail_cap)
        header = tail = None
        if usual_header:
            header = known_header(msgpack.unpackb(view[base + hdr_at:base + hdr_end], raw=False,
                                                  strict_map_key=False, use_list=False))
        if usual_tail:  # (its records, parts of the tail's bytes, decoded as one array of them)
            at = base + head_cap
            data = b"".join([b"\xdd" + records.to_bytes(4, "big"),
                             *[view[at + parts[i]:at + parts[MAX_PARTS + i]] for i in range(nparts)]])
            found = msgpack.unpackb(data, raw=False, strict_map_key=False)
            tail = Tail(found[0], found[1:], True)
        ends = None
        if header is None or tail is None:
            ends = (bytes(view[base:base + head_len]), bytes(view[base + head_cap:base + head_cap + tail_len]),
                    tail_start)
        done.append((ends, header, tail))
    return done
