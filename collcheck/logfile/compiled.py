"""The scanner's hot loop compiled (native/logscan.c): built once with the system's C compiler
into the cache (COLLCHECK_CACHE), loaded with ctypes; None wherever it cannot be (no compiler,
caching off, COLLCHECK_READER=python), and the Python loop reads alone, with the same results.

It takes the usual collectives of a log ten times faster than the Python loop: what is left of
reading a long log is then msgpack's decoding of the records it does not take (a few per
template) and the columns' arrays. ctypes needs nothing but the standard library; the library is
two C files that include only libc's headers, so building it takes a fraction of a second; the
second (native/ends.c) reads many logs' summaries at once (logfile/summaries.py)."""

from __future__ import annotations

import ctypes
import os

import numpy as np

from ..base.clibrary import loaded

_NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")
SOURCE = os.path.join(_NATIVE, "logscan.c")
SOURCES = [SOURCE, os.path.join(_NATIVE, "ends.c")]  # one library: the scanner's loop, the logs' summaries (summaries.py)
BATCH = 1 << 16  # records a call takes at most (its columns: about 3 MB)
KEY_FIELDS = 12  # a template: o t r p s ch u l a n x, and the number of keys but a non-empty d
ABSENT = -(1 << 63)  # a field absent (or nil) in a template or column

_I64, _I32, _U8 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint8)


class Out(ctypes.Structure):
    """ls_out: where a call writes its columns (numpy arrays this module allocates) and results."""

    _fields_ = [("off", _I64), ("ts", _I64), ("j", _I64), ("t", _I64),
                ("sid", _I32), ("slot", _I32), ("chain", _I32), ("site", _I32), ("flags", _U8),
                ("drec", _I32), ("dback", _I64), ("dlast", _I64), ("dlen", _U8),
                ("sstart", _I64), ("send", _I64), ("sframe", _I64), ("sframe_end", _I64),
                ("cap", ctypes.c_int64), ("dcap", ctypes.c_int64), ("scap", ctypes.c_int64),
                ("n", ctypes.c_int64), ("nd", ctypes.c_int64), ("ns", ctypes.c_int64), ("stop", ctypes.c_int64),
                ("last_eid", ctypes.c_int64), ("eid0", ctypes.c_int64), ("last_crc", ctypes.c_uint32)]


_COLUMNS = {"off": np.int64, "ts": np.int64, "j": np.int64, "t": np.int64, "sid": np.int32, "slot": np.int32,
            "chain": np.int32, "site": np.int32, "flags": np.uint8}
_DONE_COLUMNS = {"drec": np.int32, "dback": np.int64, "dlast": np.int64, "dlen": np.uint8}
_SIDE_COLUMNS = {"sstart": np.int64, "send": np.int64, "sframe": np.int64, "sframe_end": np.int64}
# the kinds of record the compiled loop lets a frame hold before its collective, for the Python
# loop to read after the batch: those it only appends to lists of their own, whatever the
# collectives (steps, syncs, calls skipped, exceptions, the end, stacks, files, API calls)
SIDE_KINDS = "OYNXQZWLA"


class Batch:
    """One log's compiled loop: its state (templates and group slots the Python scanner
    registered) and the columns a call fills, valid until the next call."""

    def __init__(self, lib, cap: int = BATCH):
        self.lib = lib
        self.state = ctypes.c_void_p(lib.ls_new())
        if not self.state:
            raise MemoryError("the compiled log reader's state")
        self.cols = {k: np.empty(cap, dtype=t) for k, t in _COLUMNS.items()}
        self.cols.update({k: np.empty(4 * cap, dtype=t) for k, t in _DONE_COLUMNS.items()})
        self.cols.update({k: np.empty(cap, dtype=t) for k, t in _SIDE_COLUMNS.items()})
        lib.ls_set_side_kinds(self.state, SIDE_KINDS.encode())
        self.out = Out(cap=cap, dcap=4 * cap, scap=cap,
                       **{k: a.ctypes.data_as(ctypes.POINTER(np.ctypeslib.as_ctypes_type(a.dtype)))
                          for k, a in self.cols.items()})

    def __del__(self):
        state, self.state = getattr(self, "state", None), None
        if state:
            self.lib.ls_free(state)

    def scan(self, data, n: int, pos: int, last_eid: int, cap: int) -> Out:
        """The usual frames from `pos` on, at most `cap` records; `data`: a ctypes pointer to the
        log's bytes (`pointer_to`), `n` of them."""
        self.out.cap = min(cap, len(self.cols["off"]))
        self.lib.ls_scan(self.state, data, n, pos, last_eid, ctypes.byref(self.out))
        return self.out

    def add_template(self, key: tuple, sid: int) -> bool:
        return bool(self.lib.ls_add_template(self.state, (ctypes.c_int64 * KEY_FIELDS)(*key), sid))

    def forget(self, key: tuple) -> None:
        """Forget the templates that begin with `key` (6 or 11 fields)."""
        self.lib.ls_forget(self.state, (ctypes.c_int64 * len(key))(*key), len(key))

    def forget_all(self) -> None:
        self.lib.ls_forget_all(self.state)

    def set_group(self, gid: int, slot: int) -> None:
        self.lib.ls_set_group(self.state, gid, slot)


def pointer_to(data):
    """(a ctypes pointer to `data`'s bytes, the object keeping it alive): bytes or a buffer."""
    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p), data
    view = (ctypes.c_char * len(data)).from_buffer_copy(data) if memoryview(data).readonly else \
        (ctypes.c_char * len(data)).from_buffer(data)
    return ctypes.cast(view, ctypes.c_void_p), view


_LIB: list = []  # [the library or None], once per process


def library():
    """The compiled loop (a ctypes library), built the first time; None where it cannot be."""
    if not _LIB:
        _LIB.append(_load())
    return _LIB[0]


def _load():
    lib = loaded(SOURCES)
    if lib is None:
        return None
    lib.ls_new.restype = ctypes.c_void_p
    lib.ls_free.argtypes = [ctypes.c_void_p]
    lib.ls_forget_all.argtypes = [ctypes.c_void_p]
    lib.ls_forget.argtypes = [ctypes.c_void_p, _I64, ctypes.c_int32]
    lib.ls_add_template.argtypes = [ctypes.c_void_p, _I64, ctypes.c_int32]
    lib.ls_add_template.restype = ctypes.c_int32
    lib.ls_set_group.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32]
    lib.ls_set_side_kinds.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ls_scan.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                            ctypes.POINTER(Out)]
    lib.ls_ends_new.restype = ctypes.c_void_p
    lib.ls_ends_new.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_char_p]
    lib.ls_ends_free.argtypes = [ctypes.c_void_p]
    lib.ls_ends_rule.restype = ctypes.c_int32
    lib.ls_ends_rule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_int64,
                                 ctypes.c_uint64, ctypes.c_int64, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64,
                                 ctypes.c_int32]
    lib.ls_ends.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64, ctypes.c_void_p]
    return lib
