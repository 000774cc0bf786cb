"""The compiled dump scanner (collcheck/inputs/flight_recorder/compiled.py, native/frparse.c, frentries.c): on any
bytes it either gives up (None: the dump is read as before) or gives exactly what reading the dump
as before gives (the C unpickler, then the column checks or entry_of): the same header, the same
columns, the same budget left, the same summary."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples
from support.fr_dumps import (
    FIELD_CHANGES,
    WORLD,
    dump,
    dumps_of_every_shape,
    entry,
    every_kind,
    write_dumps,
)

from collcheck.inputs.flight_recorder import compiled
from collcheck.inputs.flight_recorder.columns import Columns, usual_columns
from collcheck.inputs.flight_recorder.load import decode_bytes
from collcheck.inputs.flight_recorder.schema import check_entries, dump_head
from collcheck.inputs.flight_recorder.summary import rolled, summarize
from collcheck.logfile.checkpoint import roll
from collcheck.logfile.reader import LogError

pytestmark = pytest.mark.skipif(compiled.library() is None, reason="no C compiler to build the dump scanner")


def as_before(data: bytes, path: str = "rank_0"):
    """(header, columns, budget left) as the dump is read without the scanner; LogError as it is."""
    decoded = decode_bytes(path, data, fast=False)
    head, entries, budget = dump_head(path, decoded.raw, decoded.size)
    cols = usual_columns(entries, budget)
    if cols is None:
        check_entries(path, head, entries, budget)
        cols = Columns.of_entries(head["entries"])
    return head, cols, budget.left


def scanned(data: bytes, path: str = "rank_0"):
    """(header, columns, budget left) by the scanner, None where it gives up."""
    left = []
    real = dump_head

    def head_of(*args):
        out = real(*args)
        left.append(out[2])
        return out

    compiled.dump_head = head_of
    try:
        got = compiled.scan_dump(path, data)
    finally:
        compiled.dump_head = real
    return None if got is None else (*got, left[0].left)


def assert_same(data: bytes) -> bool:
    """Whether the scanner took the dump; when it did, what it gives is what reading as before gives."""
    try:
        got = scanned(data)
    except LogError as exc:
        with pytest.raises(LogError) as before:
            as_before(data)
        assert str(before.value) == str(exc)
        return True
    if got is None:
        return False
    head, cols, left = as_before(data)
    assert got[0] == head and got[2] == left
    assert got[1].values() == cols.values()
    assert summarize(0, "rank_0", got[0], got[1]) == summarize(0, "rank_0", head, cols)
    return True


@pytest.mark.parametrize("case", range(3))
def test_usual_dumps_are_scanned_to_what_reading_them_as_before_gives(case):
    d = dumps_of_every_shape()[case]
    assert assert_same(pickle.dumps(d, protocol=2))  # (1: a thread name to escape, a long frame name)


def test_dumps_the_scanner_gives_up_on_are_read_as_before():
    """Text numbers (torch's analyzer tests), a damaged entry, protocols with frames, a JSON
    dump, a root that is not a map: the scanner says None, and nothing else happens."""
    every = dumps_of_every_shape()
    for data in (pickle.dumps(every[3], protocol=2), pickle.dumps(every[4], protocol=2),
                 pickle.dumps(every[0], protocol=4), pickle.dumps(every[0], protocol=5), b'{"version": "2.10"}',
                 pickle.dumps([1, 2], protocol=2), b"", b"\x80\x02"):
        assert compiled.scan_dump("rank_0", data) is None


def test_a_big_usual_dump_is_scanned_and_shares_what_repeats():
    entries = [entry(i, str(i % 3), i // 3 + 1, ("all_reduce", "broadcast", "barrier")[i % 3], [i % 5 + 1, 4])
               for i in range(3000)]
    data = pickle.dumps(dump(entries, {"0": [0, 1], "1": [0, 1], "2": [0, 1]}), protocol=2)
    assert assert_same(data)
    cols = compiled.scan_dump("rank_0", data)[1]
    assert len(cols) == 3000 and len(cols.sides) == 5 and set(cols.values()["pg_id"]) == {"0", "1", "2"}


def test_torch_pickler_layout_memo_after_the_container():
    """torch's C++ pickler memoizes a map after its items (BINPUT after SETITEMS): shared frames
    are the same node either way."""
    frames = [{"name": "f", "filename": "/home/u/train.py", "line": 3}]
    entries = [entry(i, "0", i + 1, "all_reduce", [4], frames=frames) for i in range(4)]
    data = pickle.dumps(dump(entries, WORLD), protocol=2)
    assert assert_same(data)


def test_shared_lists_walked_beyond_the_budget_are_given_up():
    """One list of 4,000 frames shared by every entry: each entry walks it; past the file's
    budget the scanner gives up, and reading as before says why."""
    frames = [{"name": "f", "filename": "/a.py", "line": i} for i in range(4000)]
    entries = [entry(i, "0", i + 1, "all_reduce", [4], frames=frames) for i in range(300)]
    data = pickle.dumps(dump(entries, WORLD), protocol=2)
    assert compiled.scan_dump("rank_0", data) is None
    assert_same(data)


@settings(max_examples=examples(60), deadline=None)
@given(changes=FIELD_CHANGES,
       drop=st.lists(st.sampled_from(sorted(entry(0, "0", 1, "all_reduce", [4]))), max_size=2))
def test_entries_with_fields_of_any_type_are_scanned_as_before_or_given_up(changes, drop):
    raw = dump(every_kind(0), WORLD)
    for i, field, value in changes:
        raw["entries"][i][field] = value
    for field in drop:
        raw["entries"][0].pop(field, None)
    assert_same(pickle.dumps(raw, protocol=2))


@settings(max_examples=examples(80), deadline=None)
@given(seed=st.integers(0, 2**32), flips=st.integers(1, 6), cut=st.integers(0, 3))
def test_damaged_bytes_are_given_up_or_scanned_as_before(seed, flips, cut):
    """Bytes of a real-shaped dump changed at random or cut short: never a crash; what the
    scanner takes, the unpickler reads alike."""
    rng = random.Random(seed)
    data = bytearray(pickle.dumps(dump(every_kind(seed % 2), WORLD), protocol=2))
    for _ in range(flips):
        data[rng.randrange(len(data))] = rng.randrange(256)
    if cut:
        data = data[:rng.randrange(len(data))]
    try:
        assert_same(bytes(data))
    except LogError:
        pass  # (the scanner gave up and reading as before refused it: one line, as before)


def test_reader_python_turns_the_scanner_off(monkeypatch):
    monkeypatch.setenv("COLLCHECK_READER", "python")
    monkeypatch.setattr(compiled, "_LIB", [])
    assert compiled.library() is None
    assert compiled.scan_dump("rank_0", pickle.dumps(dump(every_kind(0), WORLD), protocol=2)) is None


def test_the_rolled_hash_is_checkpoint_roll_over_the_signatures():
    rng = random.Random(7)
    for n in (0, 1, 2, 3, 1000):
        sigs = [rng.getrandbits(64) for _ in range(n)]
        h = 0
        for s in sigs:
            h = roll(h, s)
        assert rolled(np.array(sigs, np.uint64)) == h


def test_a_conversion_of_scanned_dumps_is_the_conversion_read_as_before(tmp_path, monkeypatch):
    """The whole conversion, the same logs byte for byte with and without the scanner."""
    from collcheck.inputs.discover import discover
    from collcheck.inputs.flight_recorder.convert import convert

    d = write_dumps(tmp_path / "dumps", {r: dump(every_kind(r), WORLD) for r in range(12)})
    paths = discover(str(d)).found
    with_scanner = convert(paths, cache=str(tmp_path / "a"))
    monkeypatch.setattr(compiled, "_LIB", [None])
    without = convert(paths, cache=str(tmp_path / "b"))
    import os

    names = sorted(os.listdir(with_scanner))
    assert names == sorted(os.listdir(without)) and len(names) == 12
    for name in names:
        with open(os.path.join(with_scanner, name), "rb") as a, open(os.path.join(without, name), "rb") as b:
            assert a.read() == b.read(), name


def test_hostile_pickles_are_given_up_in_time_linear_in_their_size():
    """A memo index beyond the values made (it would size the memo), a header nested deeper than a
    dump's, a root of many keys, a cycle: given up, each at once."""
    import time

    deep = {"version": "2.10", "pg_config": {}, "entries": []}
    inner: list = []
    deep["pg_status"] = {"0": inner}
    for _ in range(40):
        inner.append([])
        inner = inner[0]
    cyclic: list = []
    cyclic.append(cyclic)
    wide = {f"k{i}": i for i in range(300_000)}
    wide.update(version="2.10", entries=[])
    start = time.perf_counter()
    assert compiled.scan_dump("rank_0", b"\x80\x02}r\xff\xff\xff\x7f.") is None
    assert compiled.scan_dump("rank_0", pickle.dumps(deep, protocol=2)) is None
    assert compiled.scan_dump("rank_0", pickle.dumps({"version": "2.10", "pg_config": cyclic}, protocol=2)) is None
    assert compiled.scan_dump("rank_0", pickle.dumps(wide, protocol=2))[1].values()["name"] == []
    assert time.perf_counter() - start < 10
