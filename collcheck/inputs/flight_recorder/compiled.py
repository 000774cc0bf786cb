"""A dump read by the compiled scanner (native/frparse.c, frentries.c): its pickle parsed in C, its header built
here from the parse (a few values), its entries checked and written as columns in C, with the
types, ranges and budget of columns.py. Ten times faster than the C unpickler followed by the
column checks, and it builds no object per value of the dump.

It reads the usual dump (plain data, texts in printable ASCII, every entry as torch writes it).
Anything else, or where no C compiler is (COLLCHECK_READER=python: never), gives None, and the dump
is read as before (load.py, then columns.py or schema.py): what is wrong with a dump is said there,
and only there."""

from __future__ import annotations

import ctypes
import os
import struct

import numpy as np

from ...base.clibrary import loaded
from .columns import Columns, empty_columns
from .schema import MAX_ENTRIES, MAX_VALUES, dump_head

SOURCES = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "native", f) for f in ("frparse.c", "frentries.c")]
K_NONE, K_FALSE, K_TRUE, K_INT, K_FLOAT, K_STR, K_LIST, K_TUPLE, K_DICT = range(9)
HEADER_KEYS = ("version", "comm_lib_version", "pg_config", "pg_status")
HEADER_VALUES = 1 << 20  # values of the header built at most (a group table of 1,024 groups: ~10,000)
HEADER_DEPTH = 16
CHUNK = 4096  # item ids asked for at a time

_I64, _I32, _U8 = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_uint8)
_NUMBERS = ("record_id", "seq", "created", "completed")
_IDS = ("name", "state", "pg", "gname", "gdesc", "in_side", "out_side")


class _Out(ctypes.Structure):
    """fr_out: the columns' arrays (numpy arrays this module allocates) and the budget spent."""

    _fields_ = ([(k, _I64) for k in _NUMBERS] + [("p2p", _U8)] + [(k, _I32) for k in _IDS]
                + [("spent", ctypes.c_int64)])


class _Unusual(Exception):
    """The header is not one this builds (deeper, larger): the dump is read as before."""


_LIB: list = []


def library():
    """The scanner (a ctypes library), built the first time; None where it cannot be."""
    if not _LIB:
        _LIB.append(_load())
    return _LIB[0]


def _load():
    lib = loaded(SOURCES)
    if lib is None:
        return None
    lib.fr_parse.restype = ctypes.c_void_p
    lib.fr_parse.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]
    lib.fr_free.argtypes = [ctypes.c_void_p]
    lib.fr_root.argtypes = [ctypes.c_void_p]
    lib.fr_root.restype = ctypes.c_int64
    lib.fr_node.argtypes = [ctypes.c_void_p, ctypes.c_int64, _I64, _I64]
    lib.fr_items.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, _I32, ctypes.c_int64]
    lib.fr_items.restype = ctypes.c_int64
    lib.fr_columns.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(_Out)]
    lib.fr_table.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), _I64,
                             ctypes.POINTER(ctypes.c_void_p)]
    lib.fr_table.restype = ctypes.c_int64
    return lib


def scan_dump(path: str, data: bytes) -> tuple[dict, Columns] | None:
    """(schema.dump_head's header, the entries' columns) of a usual pickled dump; None for any
    other. LogError where the header is damaged (what reading it as before says too)."""
    lib = library()
    if lib is None:
        return None
    rc = ctypes.c_int()
    handle = lib.fr_parse(data, len(data), MAX_VALUES, ctypes.byref(rc))
    if not handle:
        return None
    try:
        tree = _Tree(lib, handle, data)
        try:
            raw, entries = tree.root()
        except _Unusual:
            return None
        head, _, budget = dump_head(path, raw, len(data))
        cols = tree.columns(entries, budget.left) if entries is not None else (empty_columns(), 0)
        if cols is None:
            return None
        budget.take(cols[1])
        return head, cols[0]
    finally:
        lib.fr_free(handle)


class _Tree:
    """The parse of one dump: its values built on demand (the header), its entries as columns."""

    def __init__(self, lib, handle, data: bytes):
        self.lib, self.handle, self.data = lib, handle, data
        self.left = HEADER_VALUES
        self._a, self._b = ctypes.c_int64(), ctypes.c_int64()
        self._ids = (ctypes.c_int32 * CHUNK)()

    def node(self, node: int) -> tuple[int, int, int]:
        kind = self.lib.fr_node(self.handle, node, ctypes.byref(self._a), ctypes.byref(self._b))
        return kind, self._a.value, self._b.value

    def items(self, node: int, count: int) -> list[int]:
        out: list[int] = []
        while len(out) < count:
            got = self.lib.fr_items(self.handle, node, len(out), self._ids, CHUNK)
            if got <= 0:
                break
            out.extend(self._ids[:got])
        return out

    def root(self) -> tuple[dict, int | None]:
        """The root map's header values (built) and its entries' list node (None: no entries);
        _Unusual when it is not a map or its entries are not a list within MAX_ENTRIES."""
        kind, _, count = self.node(self.lib.fr_root(self.handle))
        if kind != K_DICT or count > 2 * HEADER_VALUES:
            raise _Unusual
        items = self.items(self.lib.fr_root(self.handle), count)
        last = {self.text(k): v for k, v in zip(items[::2], items[1::2])}  # (a repeated key: its last value)
        raw = {k: self.value(last[k], 0) for k in HEADER_KEYS if k in last}
        entries = last.get("entries")
        raw["entries"] = []
        if entries is None:
            return raw, None
        kind, _, count = self.node(entries)
        if kind == K_NONE:
            return raw, None
        if kind != K_LIST or count > MAX_ENTRIES:
            raise _Unusual
        raw["entries"] = [None] * count  # (what dump_head reads of them: a list, its length)
        return raw, entries if count else None

    def text(self, node: int) -> str:
        _, a, b = self.node(node)
        return self.data[a:a + b].decode("ascii")  # (the scanner takes ASCII texts only)

    def value(self, node: int, depth: int):
        """The value of a node as the unpickler builds it, for the header: at most HEADER_VALUES
        values in all and HEADER_DEPTH deep (shared values count each time they are built)."""
        self.left -= 1
        if self.left < 0 or depth > HEADER_DEPTH:
            raise _Unusual
        kind, a, b = self.node(node)
        if kind == K_STR:
            return self.data[a:a + b].decode("ascii")
        if kind == K_INT:
            return a
        if kind in (K_NONE, K_TRUE, K_FALSE):
            return None if kind == K_NONE else kind == K_TRUE
        if kind == K_FLOAT:
            return struct.unpack("<d", struct.pack("<q", a))[0]
        if b > self.left:
            raise _Unusual
        values = [self.value(i, depth + 1) for i in self.items(node, b)]
        if kind == K_DICT:
            return dict(zip(values[::2], values[1::2]))
        return values if kind == K_LIST else tuple(values)

    def table(self, which: int) -> tuple[bytes, list]:
        pool, size, spans = ctypes.c_void_p(), ctypes.c_int64(), ctypes.c_void_p()
        n = self.lib.fr_table(self.handle, which, ctypes.byref(pool), ctypes.byref(size), ctypes.byref(spans))
        data = ctypes.string_at(pool, size.value) if size.value else b""
        pairs = np.ctypeslib.as_array(ctypes.cast(spans, _I64), (2 * n,)).tolist() if n else []
        return data, pairs

    def columns(self, entries: int, left: int) -> tuple[Columns, int] | None:
        """The entries' columns and the budget they took; None when they are not usual."""
        _, _, n = self.node(entries)
        cols = {k: np.empty(n, np.int64) for k in _NUMBERS}
        cols["p2p"] = np.empty(n, np.uint8)
        cols.update({k: np.empty(n, np.int32) for k in _IDS})
        out = _Out(**{k: a.ctypes.data_as(ctypes.POINTER(np.ctypeslib.as_ctypes_type(a.dtype)))
                      for k, a in cols.items()})
        if self.lib.fr_columns(self.handle, entries, left, ctypes.byref(out)) != 0:
            return None
        pool, spans = self.table(0)
        texts = [pool[spans[i]:spans[i] + spans[i + 1]].decode("ascii") for i in range(0, len(spans), 2)]
        return Columns(texts, _sides(*self.table(1), texts), cols["record_id"], cols["seq"], cols["created"],
                       cols["completed"], cols["p2p"].astype(bool), cols["name"], cols["state"], cols["pg"],
                       cols["gname"], cols["gdesc"], cols["in_side"], cols["out_side"]), out.spent


def _sides(pool: bytes, spans: list, texts: list) -> list[tuple]:
    """Each distinct tensor side: (its shapes, a tuple of tuples; its dtype names, a tuple), from
    the scanner's encoding, int64s [tensors, (dims, each dim) per tensor, names, each name's text id]."""
    sides = []
    for i in range(0, len(spans), 2):
        v = np.frombuffer(pool, np.int64, spans[i + 1] // 8, spans[i]).tolist()
        shapes, at = [], 1
        for _ in range(v[0]):
            shapes.append(tuple(v[at + 1:at + 1 + v[at]]))
            at += 1 + v[at]
        sides.append((tuple(shapes), tuple(map(texts.__getitem__, v[at + 1:at + 1 + v[at]]))))
    return sides
