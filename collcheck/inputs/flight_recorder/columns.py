"""A dump's entries as columns (numbers as arrays, texts and tensor sides as ids of distinct
values), checked a field at a time, for dumps the compiled scanner (compiled.py) does not read.

schema.entry_of checks an entry field by field in Python: about 20 µs an entry, 40 s for the
2,000,000 entries of a 1,024-rank job. Almost every dump is usual: every entry a map whose fields
have the types torch writes. Such a dump is checked here with passes over each field's column
that run in C (`map`, `set`, `min`, `max`): the same limits as entry_of, the same budget, and
the same normalized values for the fields a conversion reads. Anything else (a value of another
type, out of range, a field that is missing, a budget it would exceed) returns None, and the
dump is checked entry by entry instead, which says which entry is damaged and why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import chain, repeat
from operator import itemgetter

import numpy as np

from ...base.untrusted import MAX_TEXT, visible
from .schema import (
    _FIELDS,
    MAX_DIMS,
    MAX_FRAMES,
    MAX_INT,
    MAX_LINE,
    MAX_TENSORS,
    Budget,
)

_NONE = type(None)
_INTS = frozenset((int, _NONE))
_TEXTS = frozenset((str, _NONE))
_LISTS = frozenset((list, tuple))


@dataclass
class Columns:
    """The fields of a dump's entries that a conversion reads, normalized as entry_of leaves them:
    numbers as int64 arrays, texts as ids into `texts` (-1: none), each tensor side (its shapes
    and dtype names) as an id into `sides`. A summary then works on the ids (a few distinct values,
    thousands of entries) and meets each distinct value once."""

    texts: list  # str
    sides: list  # (shapes: a tuple of tuples, dtype names: a tuple)
    record_id: np.ndarray
    seq: np.ndarray  # collective_seq_id
    created: np.ndarray  # time_created_ns
    completed: np.ndarray  # time_discovered_completed_ns, -1: none
    p2p: np.ndarray  # bool
    name: np.ndarray  # profiling_name
    state: np.ndarray  # -1: none ("")
    pg_id: np.ndarray  # -1: none
    group: np.ndarray  # its name
    desc: np.ndarray  # its description
    in_side: np.ndarray
    out_side: np.ndarray

    @classmethod
    def of_values(cls, record_id, pg_id, group, seq, name, created, completed, state, p2p, in_sizes, in_dtypes,
                  out_sizes, out_dtypes) -> Columns:
        """The columns of per-entry values (lists as entry_of normalizes them: pg_id a text or
        None, group a (name, description) pair, completed a number or None)."""
        texts: dict = {}
        sides: dict = {}

        def ids(values) -> np.ndarray:
            return np.array([-1 if v is None else texts.setdefault(v, len(texts)) for v in values], np.int32)

        def side_ids(sizes, dtypes) -> np.ndarray:
            keys = [(tuple(map(tuple, s)), tuple(d)) for s, d in zip(sizes, dtypes)]
            return np.array([sides.setdefault(k, len(sides)) for k in keys], np.int32)

        groups = list(group)
        out = cls([], [], np.array(record_id, np.int64), np.array(seq, np.int64), np.array(created, np.int64),
                  np.array([-1 if v is None else v for v in completed], np.int64), np.array(p2p, bool),
                  ids(name), ids(state), ids(pg_id), ids(g[0] for g in groups), ids(g[1] for g in groups),
                  side_ids(in_sizes, in_dtypes), side_ids(out_sizes, out_dtypes))
        out.texts, out.sides = list(texts), list(sides)
        return out

    @classmethod
    def of_entries(cls, entries: list[dict]) -> Columns:
        """The columns of entries entry_of checked."""
        def col(key):
            return list(map(itemgetter(key), entries))
        return cls.of_values(col("record_id"), col("pg_id"), col("process_group"), col("collective_seq_id"),
                             col("profiling_name"), col("time_created_ns"), col("time_discovered_completed_ns"),
                             col("state"), col("is_p2p"), col("input_sizes"), col("input_dtypes"),
                             col("output_sizes"), col("output_dtypes"))

    def __len__(self) -> int:
        return len(self.record_id)

    def text(self, ids: np.ndarray, none=None) -> list:
        """The texts of `ids` (`none` for -1)."""
        return list(map([*self.texts, none].__getitem__, ids.tolist()))

    def values(self) -> dict[str, list]:
        """Field -> its values entry by entry, as Python values (what two readings compare)."""
        completed = self.completed.tolist()
        return {"record_id": self.record_id.tolist(), "pg_id": self.text(self.pg_id),
                "group": list(zip(self.text(self.group), self.text(self.desc))), "seq": self.seq.tolist(),
                "name": self.text(self.name), "created": self.created.tolist(),
                "completed": [None if v < 0 else v for v in completed], "state": self.text(self.state, ""),
                "p2p": self.p2p.tolist(), "in": [self.sides[i] for i in self.in_side.tolist()],
                "out": [self.sides[i] for i in self.out_side.tolist()]}


def empty_columns() -> Columns:
    return Columns.of_values(*([] for _ in range(13)))


class _Unusual(Exception):
    """A column that is not as torch writes it: the dump goes entry by entry."""


class _Spent:
    """What the columns take from the dump's budget so far; more than it has is unusual (entry_of
    then says where it ran out). Checked before a column is flattened, so nothing walks more."""

    def __init__(self, left: int):
        self.left, self.total = left, 0

    def __iadd__(self, n: int):
        self.total += n
        if self.total > self.left:
            raise _Unusual
        return self


def usual_columns(entries: list, budget: Budget) -> Columns | None:
    """The entries' columns when every entry is usual; None otherwise (nothing is taken from the
    budget then: entry_of goes over the same entries)."""
    if not entries:
        return empty_columns()
    if set(map(type, entries)) != {dict}:
        return None
    n = len(entries)
    spent = _Spent(budget.left)
    texts: dict[str, str] = {}
    try:
        spent += n * len(_FIELDS)
        col = _columns(entries)
        numbers = {key: col[key] for key in ("record_id", "collective_seq_id", "p2p_seq_id", "op_id",
                                             "time_created_ns", "time_discovered_started_ns",
                                             "time_discovered_completed_ns", "timeout_ms")}
        kinds = {key: _numbers(values) for key, values in numbers.items()}
        name = _texts(col["profiling_name"], texts, spent, required=True)
        state = _texts(col["state"], texts, spent)
        _texts(col["thread_name"], texts, spent)
        _thread_ids(col["thread_id"], texts, spent)
        pg_id = _pg_ids(col["pg_id"], texts, spent)
        group = _groups(col["process_group"], texts, spent)
        p2p = _flags(col["is_p2p"], False)
        _flags(col["retired"], None)
        _durations(col["duration_ms"])
        in_sizes, out_sizes = _shapes(col["input_sizes"], spent), _shapes(col["output_sizes"], spent)
        in_dtypes, out_dtypes = _dtypes(col["input_dtypes"], texts, spent), _dtypes(col["output_dtypes"], texts, spent)
        _frames(col["frames"], texts, spent)
    except (_Unusual, OverflowError, TypeError, ValueError):
        return None
    budget.take(spent.total)
    zero = [_or(numbers[k], 0, kinds[k]) for k in ("record_id", "collective_seq_id", "time_created_ns")]
    return Columns.of_values(zero[0], pg_id, group, zero[1], name, zero[2], numbers["time_discovered_completed_ns"],
                             state, p2p, in_sizes, in_dtypes, out_sizes, out_dtypes)


def _columns(entries: list) -> dict[str, tuple]:
    """Field -> its values, entry by entry (None where absent): in one pass when every entry has
    every field (torch writes them all)."""
    try:
        rows = list(map(_ALL, entries))
    except KeyError:
        n = len(entries)
        return {key: tuple(map(dict.get, entries, repeat(key, n))) for key in _FIELDS}
    return dict(zip(_FIELDS, zip(*rows)))


_ALL = itemgetter(*_FIELDS)


def _or(values: list, default, kinds: set) -> list:
    """`values` with `default` for None (`kinds`: their types)."""
    return values if _NONE not in kinds else [default if v is None else v for v in values]


def _present(values: list, kinds: set) -> list:
    """The values that are not None (`kinds`: their types): `values` itself when none is."""
    if _NONE not in kinds:
        return values
    return [] if len(kinds) == 1 else [v for v in values if v is not None]


def _numbers(values: list, limit: int = MAX_INT) -> set:
    """Whole numbers in [0, limit), or None (absent): their types. Decimal text (torch's analyzer
    tests) is unusual."""
    kinds = set(map(type, values))
    if not kinds <= _INTS:
        raise _Unusual
    present = _present(values, kinds)
    if present and (min(present) < 0 or max(present) >= limit):
        raise _Unusual
    return kinds


def _shown(values, texts: dict, spent: _Spent) -> bool:
    """Each distinct text shown once (`visible`); the budget as entry_of takes it (per occurrence).
    Whether every text of `values` is shown as it is (the usual case: nothing to replace)."""
    distinct = set(values)
    for v in distinct - texts.keys():
        texts[v] = visible(v)
    if max(map(len, distinct), default=0) >= 64:
        spent += sum(min(len(v), MAX_TEXT) >> 6 for v in values)
    return all(texts[v] is v for v in distinct)


def _texts(values: list, texts: dict, spent: _Spent, required: bool = False) -> list:
    kinds = set(map(type, values))
    if not kinds <= (_TEXTS - {_NONE} if required else _TEXTS):
        raise _Unusual
    if _shown(_present(values, kinds), texts, spent) and _NONE not in kinds:
        return values
    return [texts[v] if v is not None else "" for v in values]


def _thread_ids(values: list, texts: dict, spent: _Spent) -> None:
    kinds = set(map(type, values))
    if not kinds <= {str, int, _NONE}:
        raise _Unusual
    if int in kinds:
        _numbers([v for v in values if v.__class__ is int] if len(kinds) > 1 else values)
    if str in kinds:
        _shown([v for v in values if v.__class__ is str] if len(kinds) > 1 else values, texts, spent)


def _pg_ids(values: list, texts: dict, spent: _Spent) -> list:
    """Numbers (as text) or texts; None where absent."""
    kinds = set(map(type, values))
    if kinds <= _INTS:
        _numbers(values)
        return list(map(str, values)) if _NONE not in kinds else [None if v is None else str(v) for v in values]
    if not kinds <= _TEXTS:
        raise _Unusual
    if _shown(_present(values, kinds), texts, spent):
        return values
    return [None if v is None else texts[v] for v in values]


def _groups(values: list, texts: dict, spent: _Spent) -> list:
    """(name, description) pairs; an absent one (filled in from pg_id by entry_of) is unusual."""
    kinds = set(map(type, values))
    if not kinds <= _LISTS or set(map(len, values)) != {2}:
        raise _Unusual
    flat = list(chain.from_iterable(values))
    if set(map(type, flat)) != {str}:
        raise _Unusual
    if _shown(flat, texts, spent):
        return values if kinds == {tuple} else list(map(tuple, values))
    return [(texts[a], texts[b]) for a, b in values]


def _flags(values: list, absent) -> list:
    kinds = set(map(type, values))
    if not kinds <= {bool, _NONE}:
        raise _Unusual
    return values if _NONE not in kinds else [absent if v is None else v for v in values]


def _durations(values: list) -> None:
    present = _present(values, set(map(type, values)))
    if not set(map(type, present)) <= {int, float}:
        raise _Unusual
    if present and not (min(present) >= 0 and max(present) < 1e18 and all(map(math.isfinite, present))):
        raise _Unusual


def _lists(values: list, limit: int, spent: _Spent) -> list:
    """The non-absent values, each a list or tuple of at most `limit` items (1 + its length taken)."""
    kinds = set(map(type, values))
    present = _present(values, kinds)
    if not kinds - {_NONE} <= _LISTS or max(map(len, present), default=0) > limit:
        raise _Unusual
    spent += len(present) + sum(map(len, present))
    return present


def _shapes(values: list, spent: _Spent) -> list:
    present = _lists(values, MAX_TENSORS, spent)
    shapes = list(chain.from_iterable(present))
    if not set(map(type, shapes)) <= _LISTS or max(map(len, shapes), default=0) > MAX_DIMS:
        raise _Unusual
    spent += len(shapes) + sum(map(len, shapes))
    _numbers(list(chain.from_iterable(shapes)))
    return values if present is values else [() if v is None else v for v in values]


def _dtypes(values: list, texts: dict, spent: _Spent) -> list:
    """One name per tensor (a single name for all of them, as text, is unusual)."""
    present = _lists(values, MAX_TENSORS, spent)
    flat = list(chain.from_iterable(present))
    if set(map(type, flat)) - {str}:
        raise _Unusual
    if _shown(flat, texts, spent):
        return values if present is values else [() if v is None else v for v in values]
    return [() if v is None else tuple(map(texts.__getitem__, v)) for v in values]


def _frames(values: list, texts: dict, spent: _Spent) -> None:
    """Each distinct frame (torch shares them among entries) checked once, as entry_of does."""
    flat = list(chain.from_iterable(_lists(values, MAX_FRAMES, spent)))
    if set(map(type, flat)) - {dict}:
        raise _Unusual
    frames = list(dict(zip(map(id, flat), flat)).values())
    _numbers(list(map(dict.get, frames, repeat("line"))), MAX_LINE)
    for key in ("filename", "name"):
        names = list(map(dict.get, frames, repeat(key), repeat("?")))
        if set(map(type, names)) - {str}:
            raise _Unusual
        _shown(names, texts, spent)
