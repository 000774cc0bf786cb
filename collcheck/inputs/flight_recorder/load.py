"""Reading PyTorch Flight Recorder dumps safely: the pickle the NCCL watchdog writes
(`torch._C._distributed_c10d._dump_nccl_trace()` / `_dump_fr_trace()`) and the JSON variants.

A dump is data from someone's machine. Only regular files are opened (a FIFO would block, a link
to /dev/zero never end), their size is checked before a byte is read. The pickle is decoded by an
unpickler that builds only plain containers and scalars: it refuses every global (a crafted dump
that names a callable is an error, and nothing of it runs), keys that are not scalars (hashing a
tuple of shared tuples takes 2^depth steps) and more operations than a dump needs. What it built
is then checked field by field (schema.py). Detection is by content, never by file name.

That unpickler is Python's own, opcode by opcode: 0.1 s a dump of 2,000 entries. In a worker
process that may die (`decode_dump(..., fast=True)`: parallel.py's workers), the C unpickler
decodes instead, more than ten times faster. It refuses the same globals, persistent ids and extension codes (what
reaches Python code); what it cannot be told runs under limits set around the call: a memo index
of 2^30 in a 9-byte file makes it reserve and clear 16 GiB (the address-space limit makes that a
MemoryError), a map key of shared tuples hashes for ever (the CPU-time limit ends the process,
and the caller decodes that file again with the Python unpickler, which refuses the key).
"""

from __future__ import annotations

import contextlib
import copyreg
import gc
import io
import json
import os
import pickle
import stat
import sys
import zlib
from typing import NamedTuple

from ...base.untrusted import visible
from ...logfile.reader import LogError, file_kind
from .schema import MAX_VALUES, dump_of

MAX_DUMP = 512 * 1024 * 1024  # larger is not a dump this reader holds in memory (torch keeps 2,000 entries: a few MiB)
_PICKLE_PROTOCOLS = frozenset(range(2, 6))


# ------------------------------------------------------------------------------------------------
# files
# ------------------------------------------------------------------------------------------------

def is_regular(path: str) -> bool:
    """A regular file (through links): the only kind of path a dump is read from."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_dump_bytes(path: str, limit: int = MAX_DUMP) -> bytes:
    """The file's bytes, when it is a regular file of at most `limit` bytes; LogError otherwise.
    Its kind and size are known before it is opened; it is opened without blocking and checked
    again once open (it may have been swapped for a FIFO meanwhile)."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise LogError(f"{path}: {file_kind(st.st_mode)}, not a Flight Recorder dump file")
        if st.st_size > limit:
            raise LogError(f"{path}: {st.st_size} bytes, larger than any Flight Recorder dump this reads ({limit})")
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                raise LogError(f"{path}: changed while it was opened, not read")
            data = f.read(st.st_size + 1)  # what it holds (a read of `limit` would reserve that much)
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > st.st_size:
        raise LogError(f"{path}: grew while it was read, not read")
    return data


def _head(path: str, n: int) -> bytes:
    """The first `n` bytes of a regular file; b"" for anything else (never opened, never blocks)."""
    if not is_regular(path):
        return b""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
        with os.fdopen(fd, "rb") as f:
            return f.read(n) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else b""
    except OSError:
        return b""


def sniff(path: str) -> str | None:
    """'pickle' or 'json' when the file looks like a Flight Recorder dump, else None."""
    head = _head(path, 64)
    return _sniff_bytes(head, lambda: _head(path, 4096))


def _sniff_bytes(head: bytes, more) -> str | None:
    if len(head) >= 2 and head[0] == 0x80 and head[1] in _PICKLE_PROTOCOLS:
        return "pickle"
    text = head.lstrip()
    if text.startswith(b"{") and (b'"version"' in head or b'"entries"' in head or b'"pg_config"' in head):
        return "json"
    if text.startswith(b"{"):  # keys may come in any order: look a little further
        further = more()
        if b'"pg_config"' in further or b'"entries"' in further:
            return "json"
    return None


# ------------------------------------------------------------------------------------------------
# decoding
# ------------------------------------------------------------------------------------------------

class _Refused(pickle.UnpicklingError):
    """The pickle names something other than data, or more of it than a dump holds."""


_SCALARS = frozenset((str, int, float, bytes, bool, type(None)))
_KEY_INT = 1 << 63  # an int key beyond int64 is no name or number of a dump


def _scalars(items) -> None:
    """Map keys and set members: scalars, never containers (hashing a tuple of shared tuples takes
    2^depth steps; one nested a million deep overflows the C stack), and ints within int64 (ints
    that differ by multiples of 2^61-1 hash alike: a map of n of them takes n^2 steps to build;
    within 2^64 no more than 8 share a hash)."""
    for k in items:
        if k.__class__ not in _SCALARS:
            raise _Refused(f"refused a map key or set member that is {type(k).__name__}: a Flight Recorder "
                           "dump's keys are names and numbers")
        if k.__class__ is int and not -_KEY_INT <= k < _KEY_INT:
            raise _Refused("refused a map key or set member that is a number beyond 64 bits: a Flight Recorder "
                           "dump's keys are names and numbers")


def _counted(op):
    def run(self):
        self.ops_left -= 1
        if self.ops_left < 0:
            raise _Refused(f"refused: more than {MAX_VALUES:,} values, more than any Flight Recorder dump holds")
        op(self)
    return run


class _DataOnly(pickle._Unpickler):  # the Python unpickler: the C one cannot be told what to refuse
    """Plain containers and scalars only, at most MAX_VALUES operations: any global (class,
    function), extension code, persistent id or out-of-band buffer is refused, and so are keys
    that are not scalars."""

    def __init__(self, file):
        super().__init__(file)
        self.ops_left = MAX_VALUES

    def find_class(self, module, name):
        raise _Refused(f"refused to load {visible(module, 80)}.{visible(name, 80)}: a Flight Recorder dump holds "
                       "only data")

    def persistent_load(self, pid):
        raise _Refused("refused a persistent id: a Flight Recorder dump holds only data")

    def _refuse(self):
        raise _Refused("refused an object that is not plain data: a Flight Recorder dump holds only data")

    def load_setitem(self):
        _scalars(self.stack[-2:-1])
        pickle._Unpickler.load_setitem(self)

    def load_setitems(self):
        _scalars(self.stack[0::2])
        pickle._Unpickler.load_setitems(self)

    def load_dict(self):
        _scalars(self.stack[0::2])
        pickle._Unpickler.load_dict(self)

    def load_additems(self):
        _scalars(self.stack)
        pickle._Unpickler.load_additems(self)

    def load_frozenset(self):
        _scalars(self.stack)
        pickle._Unpickler.load_frozenset(self)


_DataOnly.dispatch = {code: _counted(op) for code, op in pickle._Unpickler.dispatch.items()}
for _code, _op in ((pickle.SETITEM, _DataOnly.load_setitem), (pickle.SETITEMS, _DataOnly.load_setitems),
                   (pickle.DICT, _DataOnly.load_dict), (pickle.ADDITEMS, _DataOnly.load_additems),
                   (pickle.FROZENSET, _DataOnly.load_frozenset)):
    _DataOnly.dispatch[_code[0]] = _counted(_op)
for _code in (pickle.REDUCE, pickle.BUILD, pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.OBJ, pickle.EXT1, pickle.EXT2,
              pickle.EXT4, pickle.NEXT_BUFFER, pickle.READONLY_BUFFER):
    _DataOnly.dispatch[_code[0]] = _DataOnly._refuse
del _code, _op


class _DataOnlyFast(pickle.Unpickler):
    """The C unpickler, refusing every global and persistent id (extension codes: `fast_decoding`).
    Only in a worker process that may die (the module's docstring), for these reasons, opcode by
    opcode:

    - GLOBAL, STACK_GLOBAL, INST and OBJ name a class or function: find_class refuses it; PERSID
      and BINPERSID: persistent_load refuses; EXT1/2/4: no extension code is registered.
    - REDUCE, NEWOBJ, NEWOBJ_EX and BUILD apply a callable, a class or __setstate__: only those
      refused opcodes put one on the stack, so they meet data (not callable; no __setstate__ or
      __dict__ to fill) and fail. NEXT_BUFFER and READONLY_BUFFER: no buffers are given.
    - What is left builds containers and scalars, each object, item and memo reference costing at
      least a byte of the file: memory in proportion to it, except the memo, sized by the largest
      index a BINPUT/LONG_BINPUT names (9 bytes can ask for 32 GiB): the address-space limit makes
      that a MemoryError. Nesting has no depth limit, but the C unpickler keeps its stack on the
      heap, CPython frees nested containers without recursion, and schema.py never walks a value
      recursively.
    - What is left can take time beyond proportion only in hashing a map key or set member: a tuple
      of shared tuples (2^depth steps), a tuple nested a million deep (its hash recurses in C until
      the stack overflows: SIGSEGV), ints that hash alike (n^2 steps). The CPU-time limit or the
      crash ends the worker; parallel.py reads that file again with the Python unpickler, which
      refuses such keys before hashing them (`_scalars`).

    What it built is then checked as the Python unpickler's result is (schema.py: the values walked
    bounded by the file's size, entries by MAX_ENTRIES)."""

    def find_class(self, module, name):
        raise _Refused(f"refused to load {visible(module, 80)}.{visible(name, 80)}: a Flight Recorder dump holds "
                       "only data")

    def persistent_load(self, pid):
        raise _Refused("refused a persistent id: a Flight Recorder dump holds only data")


DECODE_MEMORY = 512 << 20  # bytes the C unpickler may reserve beyond 64 per byte of the dump
DECODE_SECONDS = 2  # CPU seconds it may take beyond one per 4 MiB of the dump (it reads ~40 MiB/s)


def fast_decoding() -> bool:
    """Whether the C unpickler can run here under its limits (Linux: an enforced address-space
    limit and /proc; no extension code registered, whose cached objects would skip find_class)."""
    return (sys.platform.startswith("linux") and os.path.exists("/proc/self/statm") and not copyreg._extension_registry
            and not copyreg._extension_cache)


def limit_core_dumps() -> None:
    """In a worker: the process the CPU-time limit ends leaves no core file."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))


@contextlib.contextmanager
def _limited(size: int):
    """Address space and CPU time bounded by the dump's size for the duration of the block."""
    import resource

    with open("/proc/self/statm", "rb") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    saved = {r: resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_CPU)}
    used = sum(os.times()[:2])
    wanted = {resource.RLIMIT_AS: mapped + DECODE_MEMORY + 64 * size,
              resource.RLIMIT_CPU: int(used) + 1 + DECODE_SECONDS + (size >> 22)}
    for r, want in wanted.items():
        soft, hard = saved[r]
        resource.setrlimit(r, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    enabled = gc.isenabled()
    gc.disable()  # (a dump is a million new containers: collecting meanwhile finds nothing, and doubles the time)
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        for r, (soft, hard) in saved.items():
            resource.setrlimit(r, (soft, hard))


def _unpickle(data: bytes, fast: bool):
    if not (fast and fast_decoding()):
        return _DataOnly(io.BytesIO(data)).load()
    with _limited(len(data)):
        # (buffered: the C unpickler then reads the bytes in large chunks, not an opcode at a time)
        return _DataOnlyFast(io.BufferedReader(io.BytesIO(data), buffer_size=max(len(data), 1 << 16))).load()


# every value of a JSON document follows one of these (a key: `{` or `,`; a value: `[`, `,` or `:`), or
# starts it: their count bounds the values parsing would build (more when strings hold them)
_JSON_STARTS = (b"{", b"[", b",", b":")


def _json(data: bytes, fast: bool):
    """A JSON dump parsed under a pickle's bounds: at most MAX_VALUES values, counted before a
    value is built (160 MiB of `{},` would be 56 million dicts: 4 GB); in a worker, under the
    same address-space and CPU-time limits as the C unpickler."""
    values = 1 + sum(data.count(c) for c in _JSON_STARTS)
    if values > MAX_VALUES:
        raise _Refused(f"refused: more than {MAX_VALUES:,} values, more than any Flight Recorder dump holds")
    if not (fast and fast_decoding()):
        return json.loads(data)
    with _limited(len(data)):
        return json.loads(data)


def _decode(path: str, data: bytes, kind: str, fast: bool = False):
    try:
        return _unpickle(data, fast) if kind == "pickle" else _json(data, fast)
    except _Refused as exc:
        raise LogError(f"{path}: not loaded: {exc}") from None
    except RecursionError:
        raise LogError(f"{path}: a damaged Flight Recorder dump (nested deeper than a dump is)") from None
    except MemoryError:
        raise LogError(f"{path}: a Flight Recorder dump too large to read") from None
    except Exception as exc:  # noqa: BLE001 - truncated or damaged: EOFError, ValueError, UnicodeDecodeError, ...
        raise LogError(f"{path}: a damaged or truncated Flight Recorder dump ({type(exc).__name__})") from None


class Decoded(NamedTuple):
    raw: object  # what the file decodes to, not checked yet (schema.py checks it)
    size: int  # bytes
    crc: int  # zlib.crc32 of its bytes: the same file as when the conversion began


def decode_dump(path: str, fast: bool = False) -> Decoded:
    """One rank's dump decoded; LogError (one line) for anything else. `fast`: with the C
    unpickler, only in a worker process that may die (see the module's docstring)."""
    return decode_bytes(path, read_dump_bytes(path), fast)


def decode_bytes(path: str, data: bytes, fast: bool = False) -> Decoded:
    """decode_dump of the bytes read from `path`."""
    kind = _sniff_bytes(data[:64], lambda: data[:4096])
    if kind is None:
        raise LogError(f"{path}: not a Flight Recorder dump (neither its pickle nor its JSON)")
    return Decoded(_decode(path, data, kind, fast), len(data), zlib.crc32(data))


def load_dump(path: str, fast: bool = False) -> dict:
    """One rank's dump, decoded and checked (schema.dump_of). LogError (one line) for anything else."""
    decoded = decode_dump(path, fast)
    return dump_of(path, decoded.raw, decoded.size)
