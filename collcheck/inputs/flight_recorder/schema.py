"""The one typed schema of a Flight Recorder dump: its header, its group table (`pg_config`), its
group counters (`pg_status`) and every field of every entry, checked and normalized in one place
as the dump is read (load.py), so that nothing later meets a value of the wrong type.

A dump is data from another machine. A value of the wrong type or out of range makes its entry
damaged (left out, counted, and said in the report, like a damaged log record), or, in the header
and the tables that every entry depends on, the whole dump unreadable (LogError: one line, exit 2).
Strings pass through `untrusted.visible` here, once. The work is bounded: only the shapes this
schema names are walked, never a whole value (a pickle's shared references make a 1 KB file a tree
of 2^60 nodes), every value walked counts against a budget, and limits come before allocation.
"""

from __future__ import annotations

import json
import math

from ...base.untrusted import MAX_TEXT, visible
from ...logfile.reader import LogError

SUPPORTED_MAJOR = 2  # dump versions "2.x": torch has written 2.3, 2.4, 2.7 and (2.13) 2.10, same fields
MAX_RANKS = 1 << 20  # a rank (or world) beyond this is damage, not a job
MAX_ENTRIES = 1 << 18  # torch keeps 2,000 by default (TORCH_FR_BUFFER_SIZE)
MAX_VALUES = 1 << 23  # values walked in one dump: a real one holds a few hundred per entry
MAX_FRAMES = 4096  # frames of one entry's stack
MAX_TENSORS = 1 << 16  # tensors of one entry (a coalesced op of a whole model's parameters)
MAX_DIMS = 64  # dimensions of one tensor
MAX_INT = 1 << 63  # sequence numbers, record ids, times: torch writes int64
MAX_LINE = 1 << 24  # a line number of a source file

_NUMBER_CHARS = 20  # a whole number written as text (torch's own analyzer tests write "3")


class Damaged(Exception):
    """One value that does not fit the schema: what it is and why (its entry is left out)."""


class Budget:
    """The values one dump may make the schema walk: no more than it has bytes (every value of a
    real dump takes at least one, a reference to a shared one two), and at most MAX_VALUES. A
    dump that needs more repeats shared values: it is refused."""

    def __init__(self, path: str, size: int):
        self.path, self.left = path, min(MAX_VALUES, size + 4096)
        self.frames: dict[int, tuple] = {}  # id of a frame of the decoded dump (alive meanwhile) -> checked

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise LogError(f"{self.path}: refers to more values than a Flight Recorder dump of its size holds "
                           "(shared references that repeat one value many times)")


def _kind(value) -> str:
    name = type(value).__name__
    return "nothing" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _count(value, lo: int = 0) -> int:
    """A whole number in [lo, 2^63): an int, or its decimal text."""
    if value.__class__ is int:
        n = value
    elif (value.__class__ is str and 0 < len(value) <= _NUMBER_CHARS and value.isascii()
          and (value.isdigit() or (value[:1] == "-" and value[1:].isdigit()))):
        n = int(value)
    else:
        raise Damaged(f"{_kind(value)}, not a whole number")
    if not lo <= n < MAX_INT:
        raise Damaged("out of range")
    return n


def _text(value, budget: Budget) -> str:
    """A text, shown escaped and cut (untrusted.visible): the work is its shown length's."""
    if value.__class__ is not str:
        raise Damaged(f"{_kind(value)}, not a text")
    budget.take(min(len(value), MAX_TEXT) >> 6)
    return visible(value)


def _number(value, _budget: Budget) -> int:
    return _count(value)


def _flag(value, _budget: Budget) -> bool:
    if value.__class__ is bool or (value.__class__ is int and value in (0, 1)):
        return bool(value)
    raise Damaged(f"{_kind(value)}, not true or false")


def _duration(value, _budget: Budget) -> float:
    if value.__class__ not in (int, float) or not (0 <= value < 1e18 and math.isfinite(value)):
        raise Damaged(f"{_kind(value)}, not a duration")  # (range first: isfinite of a huge int overflows)
    return float(value)


def _pg_id(value, budget: Budget) -> str:
    return str(_count(value)) if value.__class__ is int else _text(value, budget)


def _thread_id(value, budget: Budget) -> int:
    """torch writes the id as text; a name or a number past int64 is no id (0), not damage."""
    if value.__class__ is int:
        return _count(value)
    text = _text(value, budget)
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else 0


def _group(value, budget: Budget) -> tuple[str, str]:
    """`process_group`: (name, description)."""
    if value.__class__ not in (list, tuple) or len(value) != 2:
        raise Damaged(f"{_kind(value)}, not a (name, description) pair")
    return _text(value[0], budget), _text(value[1], budget)


def _sequence(value, limit: int, what: str, budget: Budget):
    if value.__class__ not in (list, tuple):
        raise Damaged(f"{_kind(value)}, not a list of {what}")
    if len(value) > limit:
        raise Damaged(f"{len(value)} {what}, more than {limit}")
    budget.take(len(value) + 1)
    return value


def _shapes(value, budget: Budget) -> tuple:
    """input_sizes / output_sizes: one list of whole numbers per tensor."""
    out = []
    for shape in _sequence(value, MAX_TENSORS, "shapes", budget):
        dims = _sequence(shape, MAX_DIMS, "dimensions", budget)
        out.append(tuple(_count(d) for d in dims))
    return tuple(out)


def _dtypes(value, budget: Budget):
    """input_dtypes / output_dtypes: a name per tensor, or one name for all of them (a text)."""
    if value.__class__ is str:
        return _text(value, budget)
    return tuple(_text(d, budget) for d in _sequence(value, MAX_TENSORS, "dtype names", budget))


def _frames(value, budget: Budget) -> tuple:
    """frames: ({filename, line, name}, ...), innermost first -> ((filename, line, name), ...).
    torch shares one frame among the entries whose stacks hold it: each is checked once."""
    out = []
    for f in _sequence(value, MAX_FRAMES, "frames", budget):
        frame = budget.frames.get(id(f))
        if frame is None:
            frame = budget.frames[id(f)] = _frame(f, budget)
        out.append(frame)
    return tuple(out)


def _frame(f, budget: Budget) -> tuple:
    if f.__class__ is not dict:
        raise Damaged(f"a frame that is {_kind(f)}, not a map")
    line = f.get("line")
    line = 0 if line is None else _count(line)
    if line >= MAX_LINE:
        raise Damaged(f"line {line} out of range")
    return _text(f.get("filename", "?"), budget), line, _text(f.get("name", "?"), budget)


_NONE = object()  # a field that must be present
# field -> (parser(value, budget), value when absent or None)
_FIELDS = {
    "record_id": (_number, 0), "pg_id": (_pg_id, None), "process_group": (_group, None),
    "collective_seq_id": (_number, 0), "p2p_seq_id": (_number, 0), "op_id": (_number, None),
    "profiling_name": (_text, _NONE), "time_created_ns": (_number, 0), "state": (_text, ""),
    "time_discovered_started_ns": (_number, None), "time_discovered_completed_ns": (_number, None),
    "duration_ms": (_duration, None), "is_p2p": (_flag, False), "retired": (_flag, None),
    "timeout_ms": (_number, None), "thread_id": (_thread_id, 0), "thread_name": (_text, ""),
    "input_sizes": (_shapes, ()), "output_sizes": (_shapes, ()), "input_dtypes": (_dtypes, ()),
    "output_dtypes": (_dtypes, ()), "frames": (_frames, ()),
}


def entry_of(raw, budget: Budget) -> dict:
    """One entry with every field of `_FIELDS` present and of its type; Damaged if it cannot be."""
    if raw.__class__ is not dict:
        raise Damaged(f"{_kind(raw)}, not a map")
    budget.take(len(_FIELDS))
    out = {}
    for key, (parse, absent) in _FIELDS.items():
        value = raw.get(key)
        if value is None:
            if absent is _NONE:
                raise Damaged(f"no {key}")
            out[key] = absent
            continue
        try:
            out[key] = parse(value, budget)
        except Damaged as exc:
            raise Damaged(f"{key}: {exc}") from None
    if out["process_group"] is None:
        out["process_group"] = (out["pg_id"] if out["pg_id"] is not None else "?", "")
    for side in ("input", "output"):  # one dtype name for every tensor: one per tensor
        if out[f"{side}_dtypes"].__class__ is str:
            out[f"{side}_dtypes"] = (out[f"{side}_dtypes"],) * max(len(out[f"{side}_sizes"]), 1)
    return out


# ------------------------------------------------------------------------------------------------
# the header and the tables: damage there makes the whole dump unreadable
# ------------------------------------------------------------------------------------------------

def _ranks(value, budget: Budget) -> tuple:
    """A group's global ranks: torch writes them as the text of a list ("[0, 1]")."""
    if value.__class__ is str:
        budget.take(len(value) // 4 + 1)
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise Damaged("ranks: not a list of ranks") from None
    ranks = _sequence(value, MAX_RANKS, "ranks", budget)
    if ranks and (set(map(type, ranks)) != {int} or min(ranks) < 0 or max(ranks) >= MAX_RANKS):
        raise Damaged(f"ranks: not a list of ranks below {MAX_RANKS}")
    return tuple(ranks)


def _key(value, budget: Budget) -> str:
    return str(_count(value)) if value.__class__ is int else _text(value, budget)


def _table(path: str, raw, what: str, budget: Budget):
    if raw is None:
        return {}
    if raw.__class__ is not dict:
        raise LogError(f"{path}: a damaged Flight Recorder dump (its {what} is {_kind(raw)}, not a map)")
    budget.take(len(raw) + 1)
    return raw


def groups_of(path: str, raw, budget: Budget) -> dict[str, dict]:
    """`pg_config`: group name -> {"desc": text, "ranks": global ranks}."""
    def group(info: dict) -> dict:
        desc, ranks = info.get("desc"), info.get("ranks")
        return {"desc": "" if desc is None else _text(desc, budget),
                "ranks": () if ranks is None else _ranks(ranks, budget)}
    return _rows(path, raw, budget, "group table (pg_config)", "a group of its pg_config", group)


def counters_of(path: str, raw, budget: Budget) -> dict[str, dict]:
    """`pg_status`: pg_id -> {"last_enqueued_collective": n or None, ...} (-1: none yet)."""
    def counters(status: dict) -> dict:
        return {c: None if status.get(c) is None else _count(status.get(c), lo=-1)
                for c in ("last_enqueued_collective", "last_started_collective", "last_completed_collective")}
    return _rows(path, raw, budget, "group counters (pg_status)", "its pg_status", counters)


def _rows(path: str, raw, budget: Budget, table: str, row: str, read) -> dict[str, dict]:
    """A map of maps keyed by group (`read` makes each row's value); a damaged row is one error."""
    out = {}
    for key, value in _table(path, raw, table, budget).items():
        try:
            name = _key(key, budget)
            if value.__class__ is not dict:
                raise Damaged(f"{_kind(value)}, not a map")
            out[name] = read(value)
        except Damaged as exc:
            raise LogError(f"{path}: a damaged Flight Recorder dump ({row}: {exc})") from None
    return out


def check_version(path: str, version) -> str:
    if version.__class__ is not str or "." not in version:
        raise LogError(f"{path}: not a Flight Recorder dump (no version)")
    major = version.split(".", 1)[0]
    if not (major.isascii() and major.isdigit() and len(major) < 8) or int(major) != SUPPORTED_MAJOR:
        raise LogError(f"{path}: Flight Recorder dump version {visible(version, 32)} is not supported "
                       f"(this collcheck reads {SUPPORTED_MAJOR}.x)")
    return visible(version, 64)


def dump_of(path: str, raw, size: int) -> dict:
    """A decoded dump, checked: {"version", "comm_lib_version", "pg_config", "pg_status",
    "entries" (the good ones), "damaged" (how many were left out), "damage" (the first one's
    reason)}; LogError when the dump as a whole cannot be read. `size`: the file's, in bytes."""
    out, entries, budget = dump_head(path, raw, size)
    check_entries(path, out, entries, budget)
    return out


def dump_head(path: str, raw, size: int) -> tuple[dict, list, Budget]:
    """dump_of's result without its entries (those still to check), and the budget left for them."""
    if raw.__class__ is not dict:
        raise LogError(f"{path}: not a Flight Recorder dump ({_kind(raw)}, not a map)")
    budget = Budget(path, size)
    version = check_version(path, raw.get("version"))
    lib = raw.get("comm_lib_version")
    entries = raw.get("entries")
    entries = [] if entries is None else entries
    if entries.__class__ is not list:
        raise LogError(f"{path}: a damaged Flight Recorder dump (its entries are not a list of maps)")
    if len(entries) > MAX_ENTRIES:
        raise LogError(f"{path}: {len(entries)} entries, more than any Flight Recorder buffer this reads ({MAX_ENTRIES})")
    out = {"version": version, "comm_lib_version": visible(lib, 64) if lib.__class__ is str else "",
           "pg_config": groups_of(path, raw.get("pg_config"), budget),
           "pg_status": counters_of(path, raw.get("pg_status"), budget),
           "entries": [], "damaged": 0, "damage": None}
    return out, entries, budget


def check_entries(path: str, out: dict, entries: list, budget: Budget) -> None:
    """Each entry checked (entry_of) into out["entries"]; the damaged ones counted."""
    for i, e in enumerate(entries):
        try:
            out["entries"].append(entry_of(e, budget))
        except Damaged as exc:
            out["damaged"] += 1
            if out["damage"] is None:
                out["damage"] = f"entry {i}: {exc}"
    if entries and not out["entries"]:
        raise LogError(f"{path}: a damaged Flight Recorder dump (all its {len(entries)} entries are damaged; "
                       f"the first: {out['damage']})")
