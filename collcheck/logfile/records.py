"""The typed schema of a log's records: each key of each kind, its type and range
(docs/log-format.md's table), checked once where records are decoded.

A log may come from another machine, written by anything: a value of the wrong type or out of
range must never reach the code after the reader (a traceback, a loop over 10^12 ranks, a 2 GB
string). `problem(rec, world)` says what is wrong with a record (None: nothing); the frame
reader (logfile/frames.py) calls it on every record it yields but collectives, and leaves a record that
fails out as damage. A collective is checked in two halves, `coll_problem` (the fields that
differ from one collective to the next) and `signature_problem` (its signature's); the scanner,
which reads millions of them, gives the same verdicts faster (logfile/scanner.py: struct packers for
the ranges below, and its caches of keys already checked). Keys a kind does not list are ignored
(later minor versions may add them), and never read. Strings are only checked to be strings: the
model keeps them as they are (JSON holds them exactly), and every renderer shows them through
`collcheck.base.untrusted.visible`.

The records that several writers (or the reader) build are built here, once: the header
(`header_record`, `known_header`) and the interning records (`string_record`, ...).

Standard library only, like the rest of the log layer.
"""

from __future__ import annotations

import math
import struct

from ..base import __version__
from . import format as lf

MAX_WORLD = 1 << 20  # ranks in a run: a header claiming more is not a log of a real run
MAX_ID = 1 << 30  # interned ids, group ids, thread ids (the scanner keeps some in signed 32-bit columns)
MAX_COUNT = 1 << 64  # event ids, positions, call ids: msgpack's uint64
MAX_LINE = 10 ** 7  # a line number (replay pads to it)
MAX_DIMS = 64  # dimensions of one tensor
MAX_ELEMENTS = 1 << 62  # elements of one tensor
MAX_ITEMS = 1 << 20  # entries of one list (tensors, frames, threads, counters, arguments)
MAX_INT64 = 1 << 63


# -- checkers: each returns None, or what the value should have been -------------------------------

def _int(lo: int, hi: int):
    """An int in lo..hi-1 (not a float; a bool is 0 or 1, as Python has it: the scanner's inline
    checks take it so)."""
    what = f"an integer in {lo}..{hi - 1}"

    def check(v, world):
        return None if (v.__class__ is int or v.__class__ is bool) and lo <= v < hi else what
    check.bounds = (lo, hi)  # (what the compiled summaries check: logfile/summaries.py)
    return check


_ID = _int(0, MAX_ID)
_COUNT = _int(0, MAX_COUNT)
_TIME = _int(-(1 << 63), 1 << 63)  # µs since the origin (synthetic logs start before it), differences: int64
_LINE = _int(0, MAX_LINE + 1)
_SIGNED = _int(-MAX_INT64, MAX_INT64)
_NS = _int(0, MAX_INT64)  # a clock in ns


def _str(v, world):
    return None if v.__class__ is str else "a string"


def _flag(v, world):
    return None if v.__class__ is bool or (v.__class__ is int and v in (0, 1)) else "a boolean"


def _seconds(v, world):
    if v.__class__ is int or v.__class__ is float:
        if math.isfinite(v) and 0 <= v < MAX_COUNT:
            return None
    return "a number of seconds"


def _rank(v, world):
    return None if v.__class__ is int and 0 <= v < world else f"a rank in 0..{world - 1}"


def _root(v, world):
    """A root or peer as the user passed it: torch raises on one outside the group (`invalid root
    rank: 5`), and the log keeps the call that raised, so only its size is bounded. (A bool is 0 or 1,
    as for `_int`: the scanner's inline checks, keyed by value, take it so.)"""
    ok = (v.__class__ is int or v.__class__ is bool) and -MAX_WORLD <= v < MAX_WORLD
    return None if ok else f"a rank in -{MAX_WORLD}..{MAX_WORLD - 1}"


def _seq(v) -> bool:
    return v.__class__ is tuple or v.__class__ is list


def _list_of(item, most: int = MAX_ITEMS):
    what = f"a list of at most {most} entries"

    def check(v, world):
        if not _seq(v) or len(v) > most:
            return what
        for x in v:
            wrong = item(x, world)
            if wrong is not None:
                return f"a list of {wrong}s"
        return None
    check.item, check.most = item, most  # (what the compiled summaries check: logfile/summaries.py)
    return check


def _ranks(v, world):
    """A group's members: distinct global ranks."""
    if not _seq(v) or len(v) > world:
        return f"a list of at most {world} ranks"
    for r in v:
        if r.__class__ is not int or not 0 <= r < world:
            return f"a list of ranks in 0..{world - 1}"
    return None if len(set(v)) == len(v) else "a list of distinct ranks"


def _id_or_text(v, world):
    return None if v.__class__ is str or (v.__class__ is int and -MAX_INT64 <= v < 1 << 64) else "an id"


def _tensors(v, world):
    """A tensor spec's `t`: [[dtype string id, [dims...]], ...]."""
    if not _seq(v) or len(v) > MAX_ITEMS:
        return "a list of tensors"
    for t in v:
        if not _seq(t) or len(t) != 2 or _ID(t[0], world) is not None:
            return "a list of [dtype id, shape] pairs"
        dims = t[1]
        if not _seq(dims) or len(dims) > MAX_DIMS:
            return f"shapes of at most {MAX_DIMS} dimensions"
        n = 1
        for d in dims:
            if d.__class__ is not int or not 0 <= d < MAX_ELEMENTS:
                return "shapes of sizes >= 0"
            n *= d
            if n >= MAX_ELEMENTS:
                return "shapes of fewer than 2**62 elements"
    return None


def _completions(v, world):
    """A collective's `d`: [[event ids back, µs before it returned(, µs before it completed)], ...]
    (as many as the decoder's limits let it hold: the scanner checks them inline)."""
    if not _seq(v):
        return "a list of completions"
    for entry in v:
        if not _seq(entry) or not 2 <= len(entry) <= 3:
            return "a list of [ids back, returned, completed] entries"
        if _COUNT(entry[0], world) is not None:
            return "completions of earlier event ids"
        for t in entry[1:]:
            if _TIME(t, world) is not None:
                return "completions with µs times"
    return None


def _splits(v, world):
    """all_to_all_single's `sp`: [input split sizes, output split sizes], each per group rank."""
    if not _seq(v) or len(v) > 2:
        return "[input splits, output splits]"
    for sizes in v:
        if not _seq(sizes) or len(sizes) > world:
            return f"split size lists of at most {world} entries"
        for s in sizes:
            if s.__class__ is not int or not 0 <= s < MAX_ELEMENTS:
                return "split sizes >= 0"
    return None


def _frame(v, world):
    if not _seq(v) or len(v) != 3 or v[0].__class__ is not str or _LINE(v[1], world) or v[2].__class__ is not str:
        return "[file, line, function]"
    return None


def _thread_stack(v, world):
    if v.__class__ is not dict:
        return "a thread {id, n, f}"
    wrong = _problem_of(v, _STACK_THREAD, (), world)
    return None if wrong is None else "a thread {id, n, f}"


def _counter(v, world):
    if not _seq(v) or len(v) != 2 or not (v[0].__class__ is int and 0 <= v[0] < 1 << 64):
        return "[key, j]"
    return None if v[1].__class__ is int and -1 <= v[1] < MAX_COUNT else "[key, j]"


def _sequence(v, world):
    """A checkpoint's [seq_key, count, rolling hash]."""
    if _seq(v) and len(v) == 3 and all(x.__class__ is int and 0 <= x < 1 << 64 for x in v):
        return None
    return "[key, count, hash]"


_STACK_THREAD = {"id": _id_or_text, "n": _str, "f": _list_of(_frame)}

# the fields of a collective that its signature is made of (the scanner's cache key)
SIGNATURE = {"o": _ID, "g": _ID, "t": _ID, "r": _int(0, 1 << 16), "p": _root, "u": _ID, "x": _ID, "tag": _SIGNED,
             "sp": _splits}
# the fields that differ from one collective to the next
COLL_VARYING = {"j": _COUNT, "ts": _TIME, "s": _ID, "ch": _ID, "h": _ID, "l": _ID, "q": _COUNT, "qi": _ID,
                "a": _flag, "n": _flag, "st": _list_of(_ID), "d": _completions}

# kind -> ({key: checker}, required keys)
SCHEMA: dict[str, tuple[dict, tuple]] = {
    lf.HEADER: ({"magic": _str, "v": _int(0, 1 << 16), "collcheck": _str, "torch": _str, "python": _str,
                 "backend": _str, "rank": _int(0, MAX_WORLD), "world": _int(1, MAX_WORLD + 1), "run": _str,
                 "launch": _str, "restart": _int(0, MAX_ID), "host": _str, "cpus": _int(0, MAX_ID),
                 "threads": _int(0, MAX_ID), "pid": _int(0, 1 << 31), "argv": _list_of(_str), "wall_ns": _NS,
                 "mono_ns": _NS, "stack": _str, "hang_s": _seconds, "poll_ms": _seconds, "seg": _int(0, MAX_ID), "source": _str,
                 "notes": _list_of(_str), "unchecked": _list_of(_str), "p2p_unnumbered": _flag, "tail": _flag},
                ("magic", "v", "rank", "world", "run")),
    lf.STRING: ({"i": _ID, "s": _str}, ("i", "s")),
    lf.SITE: ({"i": _ID, "f": _ID, "l": _LINE, "n": _ID}, ("i", "f", "l", "n")),
    lf.CHAIN: ({"i": _ID, "s": _list_of(_ID)}, ("i", "s")),
    lf.TSPEC: ({"i": _ID, "t": _tensors}, ("i", "t")),
    lf.THREAD: ({"h": _ID, "n": _str, "id": _id_or_text}, ("n",)),
    lf.GROUP: ({"op": _str, "gid": _ID, "g": _str, "d": _str, "r": _ranks, "m": _flag, "us": _COUNT, "s": _ID,
                "ts": _TIME, "all": _flag, "cp": _flag}, ()),
    lf.COLL: ({**SIGNATURE, **COLL_VARYING}, ("o", "g")),
    lf.DONE: ({"i": _COUNT, "r": _TIME, "c": _TIME, "e": _str}, ("i",)),
    lf.API: ({}, ()),
    lf.STACKS: ({"i": _COUNT, "op": _str, "waited_s": _seconds, "ts": _TIME, "threads": _list_of(_thread_stack)}, ()),
    lf.EXCEPTION: ({"t": _str, "m": _str, "ts": _TIME, "s": _ID}, ()),
    lf.TRAILER: ({"ts": _TIME, "wall_ns": _NS}, ()),
    lf.DISABLED: ({"m": _str, "e": _str, "ts": _TIME}, ()),
    lf.NON_MEMBER: ({"x": _ID, "s": _ID, "h": _ID, "ts": _TIME}, ("x",)),
    lf.SYNC: ({"ts": _TIME, "s": _ID, "i": _COUNT, "w": _str}, ()),
    lf.COUNTERS: ({"c": _list_of(_counter)}, ("c",)),
    lf.STEP: ({"ts": _TIME, "o": _ID}, ()),
    lf.FILE: ({"f": _ID, "s": _COUNT, "m": _NS, "h": _str}, ("f",)),
    lf.SOURCE: ({"i": _COUNT, "p": _rank}, ("i", "p")),
    lf.CHECKPOINT: ({"n": _COUNT, "c": _list_of(_sequence), "w": _str, "o": _list_of(_COUNT),
                     "x": _list_of(_COUNT), "more": _flag, "v": _int(0, 1 << 64), "a": _int(0, 1 << 64)}, ("n", "c")),
}
assert set(SCHEMA) == lf.ALL_KINDS


def _problem_of(rec: dict, checks: dict, required: tuple, world: int) -> str | None:
    """'that lacks ...' / 'whose ... is not ...', or None."""
    for key in required:
        if key not in rec:
            return f"that lacks {key!r}"
    for key, value in rec.items():
        check = checks.get(key) if key.__class__ is str else None
        if check is not None:
            wrong = check(value, world)
            if wrong is not None:
                return f"whose {key!r} is not {wrong} ({type(value).__name__})"
    return None


def problem(rec: dict, world: int = MAX_WORLD) -> str | None:
    """What is wrong with a record of a known kind (None: nothing), in a few words; `world`:
    the header's, which bounds ranks (MAX_WORLD before the header is known)."""
    kind = rec["k"]
    checks, required = SCHEMA[kind]
    wrong = _problem_of(rec, checks, required, world)
    if wrong is None and kind == lf.HEADER and rec["rank"] >= rec["world"]:
        wrong = "whose rank is not below its world size"
    return None if wrong is None else f"a {kind!r} record {wrong}"


def described(check) -> tuple | None:
    """A checker of SCHEMA in plain terms, for the compiled summaries that make the same checks
    (logfile/summaries.py): ("int", lo, hi) (hi excluded, a bool taken as 0 or 1), ("str",),
    ("seconds",), ("sequence",), ("list", its items', most); None for the others."""
    if check is _flag:
        return ("int", 0, 2)
    simple = {_str: ("str",), _seconds: ("seconds",), _sequence: ("sequence",)}.get(check)
    if simple is not None:
        return simple
    if getattr(check, "bounds", None) is not None:
        return ("int", *check.bounds)
    item = described(check.item) if getattr(check, "item", None) is not None else None
    return ("list", item, check.most) if item is not None and item[0] != "list" else None


# ints of the varying fields, by their bounds: the usual collective has nothing else to check
_VARYING_INT = {k: (0, 2) if c is _flag else (0, MAX_ID if c is _ID else MAX_COUNT)
                for k, c in COLL_VARYING.items() if c in (_ID, _COUNT, _flag)}


def coll_problem(rec: dict, world: int = MAX_WORLD) -> str | None:
    """`problem` for the fields of a collective that differ from one to the next (its signature's
    are checked by the scanner, once per signature): the frame reader's hot path."""
    bounds, varying = _VARYING_INT, COLL_VARYING
    for key, v in rec.items():
        if v.__class__ is int:
            b = bounds.get(key)
            if b is not None and b[0] <= v < b[1]:
                continue
        if key == "k" or key not in varying:
            continue
        wrong = varying[key](v, world)
        if wrong is not None:
            return f"a 'C' record whose {key!r} is not {wrong} ({type(v).__name__})"
    if "g" not in rec or "o" not in rec:
        return "a 'C' record that lacks its op or group"
    return None


# The same ranges as struct packers (checked in C, for the hot loops): a collective's ts (int64)
# and j (uint64), and the entries of its `d` (event ids back: uint64; µs: int64).
TS_J = struct.Struct("<qQ")
DONE3, DONE2 = struct.Struct("<Qqq"), struct.Struct("<Qq")


def completions_checked(done, ts) -> list:
    """The entries of a collective's `d` up to the first that is not as the schema has them (none
    when `ts`, None when absent, is not): what the frame reader turns into D records when it was
    not told to check the whole collective (the scanner did, and left out one that fails)."""
    if done.__class__ is not tuple and done.__class__ is not list:
        return []
    out = []
    try:
        TS_J.pack(0 if ts is None else ts, 0)
        for entry in done:
            if entry.__class__ is not tuple and entry.__class__ is not list:
                break
            (DONE3 if len(entry) == 3 else DONE2).pack(*entry)
            out.append(entry)
    except struct.error:
        pass
    return out


def signature_problem(rec: dict, world: int = MAX_WORLD) -> str | None:
    """`problem` for the fields of a collective's signature (o, g, t, r, p, u, x, tag, sp)."""
    if "g" not in rec or "o" not in rec:
        return "a 'C' record that lacks its op or group"
    for key, check in SIGNATURE.items():
        if key in rec:
            wrong = check(rec[key], world)
            if wrong is not None:
                return f"a 'C' record whose {key!r} is not {wrong} ({type(rec[key]).__name__})"
    return None


# -- builders: the records that more than one writer or reader makes, keys in the order written ---

def header_record(rank: int, world: int, run: str, **fields) -> dict:
    """A new log's first record, of this collcheck and this format version: `fields` are the
    header's other keys (SCHEMA's; the recorder's, a converted dump's, a synthetic run's), in
    the schema's order whatever order they are passed in (the bytes written do not depend on
    the caller)."""
    return known_header({"magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "collcheck": __version__, "rank": rank,
                         "world": world, "run": run, **fields}, strict=True)


def known_header(header: dict, strict: bool = False) -> dict:
    """A header of only the keys the schema knows, in its order, arrays as lists (what the reader
    keeps of a log's header: nothing walks what it does not know); `strict`: a key it does not
    know is a TypeError (a writer's mistake)."""
    keys = SCHEMA[lf.HEADER][0]
    if strict and not keys.keys() >= header.keys():
        raise TypeError(f"not header keys: {sorted(header.keys() - keys.keys())}")
    out = {"k": lf.HEADER}
    for key in keys:
        if key in header:
            v = header[key]
            out[key] = list(v) if v.__class__ is tuple else v  # (argv, notes, unchecked: lists of strings)
    return out


def string_record(i: int, s: str) -> dict:
    return {"k": lf.STRING, "i": i, "s": s}


def site_record(i: int, file_id: int, line: int, function_id: int) -> dict:
    return {"k": lf.SITE, "i": i, "f": file_id, "l": line, "n": function_id}


def chain_record(i: int, site_ids: list) -> dict:
    """A call chain: the site ids of the user's frames, outermost first."""
    return {"k": lf.CHAIN, "i": i, "s": site_ids}


def tspec_record(i: int, tensors: list) -> dict:
    """A tensor spec: [[dtype string id, [dims]], ...]."""
    return {"k": lf.TSPEC, "i": i, "t": tensors}


def stop_record(message: str, error: str | None = None, ts: int | None = None) -> dict:
    """Recording stopped (Q): `message` says why; `error`, the errno's name when a write of the log
    failed (ENOSPC, EFBIG, ...: nothing follows it then); `ts`, when (µs on the log's clock)."""
    rec = {"k": lf.DISABLED, "m": message[:500]}
    if error is not None:
        rec["e"] = error
    if ts is not None:
        rec["ts"] = ts
    return rec
