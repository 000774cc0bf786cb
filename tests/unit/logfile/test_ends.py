"""A log's summary read from one open of the file (reader.read_ends: its first and last bytes;
read_header and read_tail given them; model/load.py's `_summary`) says what reading the header and
the tail each on their own said: the same header, the same last checkpoint and records after it,
the same error, on real logs whole, cut at every byte of their end, damaged, capped, of format 1,
of many groups, or with any bytes at their end."""

from __future__ import annotations

import itertools
import os
import random
import time

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import examples
from support.logbytes import bad_input, format1

from collcheck import synth
from collcheck.logfile.reader import (
    SETTLED_NS,
    LogError,
    _by_directory,
    existing,
    may_exist,
    parse_header,
    read_ends,
    read_header,
    read_prefix,
    segment_paths,
    segmented,
)
from collcheck.logfile.tail import SHORT, TAIL_READS, _tail_of, read_tail
from collcheck.model.load import _summary
from collcheck.synth import write_clean_run


def _as_before(path: str):
    """(header or the LogError's words, tail): the header parsed from the file's first 4 KiB, 64 KiB
    or 1 MiB, the tail from its last 1 KiB, 16 KiB... each read on its own (as before read_ends)."""
    header = None
    for size in (1 << 12, 1 << 16, 1 << 20):
        data = read_prefix(path, size)
        try:
            header = parse_header(data, path)
            break
        except LogError as exc:
            if len(data) < size or size == 1 << 20:
                header = f"LogError: {exc}"
                break
    tail = None
    size = os.path.getsize(path)
    for want in TAIL_READS:
        start = max(0, size - want)
        with open(path, "rb") as f:
            f.seek(start)
            found = _tail_of(f.read(), start == 0)
        if found is not None or start == 0:
            tail = found or None
            break
    return header, tail


def _now(path: str):
    """The same from one open: read_ends, then read_header and read_tail given its bytes; and
    `_summary` (which takes the tail only where it stands for the whole log)."""
    ends = read_ends(path, TAIL_READS[0])
    try:
        header = read_header(path, ends[0] if ends else None)
    except LogError as exc:
        header = f"LogError: {exc}"
    tail = read_tail(path, ends[1:] if ends else None)
    assert read_tail(path) == tail  # (and read on its own, as before, too)
    if not isinstance(header, str):
        h, t = _summary(path, True)
        assert h == header and t == (tail if tail is not None and tail.complete and h.get("v", 1) >= 2 else None)
        assert _summary(path, False) == (header, None)
    return header, tail


def _same(path: str) -> None:
    before, now = _as_before(path), _now(path)
    assert now == before, path


def _bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _logs(tmp_path, world=3, groups=1, seed=3) -> list[str]:
    prog = synth.generate_program(random.Random(seed), world, 40, groups=groups, p2p=False)
    return synth.write_run(str(tmp_path / f"run-{world}-{groups}-{seed}"), prog)


def test_whole_logs_of_few_and_many_groups(tmp_path):
    paths = _logs(tmp_path) + _logs(tmp_path, world=16, groups=12, seed=5)
    for world in (8, 12):  # rank 0 in 21, then 55 groups: checkpoints of 466, then 1,146 bytes
        groups = [g for g in itertools.combinations(range(world), 3) if 0 in g]
        paths += write_clean_run(str(tmp_path / f"groups-{world}"), world, 2000, groups=groups)[:2]
    sizes = {len(msgpack.packb(read_tail(p).checkpoint)) for p in paths}
    assert min(sizes) < SHORT < 1024 and any(SHORT < s < 1024 for s in sizes) and max(sizes) > 1024
    for path in paths:
        assert read_tail(path) is not None
        _same(path)


def test_every_cut_of_the_end_and_every_damaged_byte_there(tmp_path):
    path = _logs(tmp_path)[0]
    data = _bytes(path)
    cut = str(tmp_path / "cut.msgpack")
    found = 0
    for end in range(len(data) - 300, len(data) + 1):  # a kill at any byte of the end
        with open(cut, "wb") as f:
            f.write(data[:end])
        _same(cut)
        found += read_tail(cut) is not None
    assert 0 < found < 301
    for at in [*range(0, 120, 3), *range(len(data) - 300, len(data))]:  # one byte changed
        with open(cut, "wb") as f:
            f.write(data[:at] + bytes((data[at] ^ 0x5A,)) + data[at + 1:])
        _same(cut)


def test_format_1_tiny_foreign_and_capped_logs(tmp_path):
    path = _logs(tmp_path)[0]
    old = str(tmp_path / "old.msgpack")
    with open(old, "wb") as f:
        f.write(format1(_bytes(path)))
    _same(old)
    for case in ("zero-bytes", "corrupt", "unknown-version"):
        for p in sorted(os.listdir(bad_input(tmp_path, case))):
            _same(str(tmp_path / case / p))
    with open(path + ".1", "wb") as f:  # a later segment: the log's end is not this file's
        f.write(b"")
    assert read_tail(path) is not None and _summary(path, True) == (read_header(path), None)


def test_what_is_not_a_regular_file_is_not_opened(tmp_path):
    fifo = str(tmp_path / "rank-00000.0.msgpack")
    os.mkfifo(fifo)
    assert read_ends(fifo, TAIL_READS[0]) is None and read_ends(str(tmp_path / "none"), 1024) is None
    with pytest.raises(LogError, match="a FIFO, not a log file"):
        _summary(fifo, True)


@settings(deadline=None, max_examples=examples(40))
@given(junk=st.binary(max_size=3000), keep=st.integers(0, 400), head=st.binary(max_size=40))
def test_any_bytes_at_either_end(tmp_path_factory, junk, keep, head):
    directory = tmp_path_factory.mktemp("ends")
    path = _logs(directory)[0]
    data = _bytes(path)
    with open(path, "wb") as f:
        f.write(data[:len(data) - keep] + junk)
    _same(path)
    with open(path, "wb") as f:
        f.write(head + data[len(head):])
    _same(path)


def test_a_file_beside_the_logs_is_looked_up_in_one_listing_once_the_directory_settled(tmp_path):
    """may_exist: a directory changed just now is looked at path by path (a file made within its
    clock's tick is seen); a settled one by its listing, read once for every log."""
    d = tmp_path / "run"
    d.mkdir()
    (d / "a").write_bytes(b"")
    assert may_exist(str(d / "a")) and not may_exist(str(d / "b"))
    (d / "b").write_bytes(b"")
    assert may_exist(str(d / "b"))  # (just made: seen)
    old = time.time_ns() - 10 * SETTLED_NS
    os.utime(d, ns=(old, old))
    assert may_exist(str(d / "b")) and not may_exist(str(d / "c"))
    (d / "c").write_bytes(b"")
    os.utime(d, ns=(old, old))  # (as if made unseen within the listing's tick: the listing answers)
    assert not may_exist(str(d / "c"))
    (d / "c").unlink()
    assert not may_exist(str(d / "c"))  # (changed now: looked at)


def test_many_paths_looked_up_at_once_say_what_each_looked_up_alone_says(tmp_path):
    """existing (thousands of SIGTERM dumps looked for) and segmented (thousands of logs' later
    segments) give, with one look at each directory, what may_exist and segment_paths give path by
    path: in a directory just changed and in a settled one, with segments, and in a directory
    that is not there."""
    d, e = tmp_path / "run", tmp_path / "other"
    d.mkdir(), e.mkdir()
    for name in ("a", "a.1", "a.2", "b", "c.7", "x.txt"):
        (d / name).write_bytes(b"")
    (e / "a").write_bytes(b"")
    paths = [str(p / n) for p in (d, e) for n in ("a", "b", "c", "x.txt", "y.txt")] + [str(tmp_path / "gone" / "a")]
    for settled in (False, True):
        if settled:
            old = time.time_ns() - 10 * SETTLED_NS
            os.utime(d, ns=(old, old))
        assert existing(paths) == {p for p in paths if may_exist(p)}
        assert segmented(paths) == {p for p in paths if segment_paths(p)} == {str(d / "a"), str(d / "c")}
    assert str(d / "b") in existing(paths) and str(d / "y.txt") not in existing(paths)
    assert str(tmp_path / "gone" / "a") in existing(paths)  # (not known: the caller looks)


@settings(deadline=None, max_examples=examples(200))
@given(paths=st.lists(st.text(alphabet="ab/.", max_size=7), max_size=8))
def test_paths_are_grouped_by_directory_as_os_path_split_splits_them(paths):
    """(A path in the directory of the one before is split by its length: the same answer.)"""
    expected: dict = {}
    for path in [*paths, *(f"/run/{p}" for p in paths)]:
        directory, base = os.path.split(path)
        expected.setdefault(directory or ".", []).append((path, base))
    assert _by_directory([*paths, *(f"/run/{p}" for p in paths)]) == expected
