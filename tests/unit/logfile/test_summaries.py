"""The compiled pass over many logs' ends (logfile/summaries.py, native/ends.c) gives each log the
summary the Python reader gives (model/load.py's `_summary`): the same header, the same last
checkpoint and records after it, the same error; on real logs whole, cut at every byte of their
end, damaged at either end, of format 1, capped, foreign, missing or not regular files, and with
any value of any type in any key of the header or of the records after the checkpoint. And it
takes the usual logs itself (else it would be a slower copy of the Python reader)."""

from __future__ import annotations

import itertools
import os
import random

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples
from support.logbytes import bad_input, format1, frames_of, pack

from collcheck import synth
from collcheck.logfile import format as lf
from collcheck.logfile.reader import LogError, segmented
from collcheck.logfile.records import SCHEMA, described
from collcheck.logfile.summaries import compiled_summaries, read_summaries
from collcheck.model import load
from collcheck.model.load import _summary
from collcheck.synth import write_clean_run

pytestmark = pytest.mark.skipif(not compiled_summaries(), reason="no C compiler here: the Python reader reads alone")


def _python(path: str, capped: set):
    try:
        return _summary(path, True, None, capped)
    except LogError as exc:
        return f"LogError: {exc}"


def _same(paths: list[str]) -> list:
    """The compiled pass's summaries of `paths` (read at once) are the Python reader's; what it read."""
    capped = segmented(paths)
    read = read_summaries(paths)
    compiled = []
    for path, r in zip(paths, read):
        try:
            compiled.append(_summary(path, True, None, capped, r))
        except LogError as exc:
            compiled.append(f"LogError: {exc}")
    assert compiled == [_python(p, capped) for p in paths]
    return read


def _logs(directory, world=3, groups=1, seed=3) -> list[str]:
    prog = synth.generate_program(random.Random(seed), world, 40, groups=groups, p2p=False)
    return synth.write_run(str(directory / f"run-{world}-{groups}-{seed}"), prog)


def _bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(path: str, data: bytes) -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_clean_logs_of_few_and_many_groups_are_the_compiled_pass_s_own(tmp_path):
    paths = _logs(tmp_path) + _logs(tmp_path, world=16, groups=12, seed=5)
    for world in (8, 12):  # checkpoints of 466, then 1,146 bytes: beyond the last KiB, the Python reader's
        groups = [g for g in itertools.combinations(range(world), 3) if 0 in g]
        paths += write_clean_run(str(tmp_path / f"groups-{world}"), world, 2000, groups=groups)[:2]
    paths += write_clean_run(str(tmp_path / "clean"), 4, 300)
    read = _same(paths)
    taken = [(header is not None, tail is not None) for _, header, tail in read]
    assert all(h for h, _ in taken) and sum(t for _, t in taken) >= len(paths) - 2, taken


def test_every_cut_of_the_end_and_every_damaged_byte_at_either_end(tmp_path):
    data = _bytes(_logs(tmp_path)[0])
    cuts = [_write(str(tmp_path / f"cut-{end}.msgpack"), data[:end]) for end in range(len(data) - 300, len(data) + 1)]
    assert sum(tail is not None for _, _, tail in _same(cuts)) > 0
    flipped = [_write(str(tmp_path / f"flip-{at}.msgpack"), data[:at] + bytes((data[at] ^ 0x5A,)) + data[at + 1:])
               for at in [*range(0, 200, 3), *range(len(data) - 200, len(data))]]
    _same(flipped)


def test_format_1_tiny_foreign_capped_missing_and_not_regular(tmp_path):
    path = _logs(tmp_path)[0]
    paths = [_write(str(tmp_path / "old.msgpack"), format1(_bytes(path))), path]
    for case in ("zero-bytes", "corrupt", "unknown-version"):
        paths += [str(tmp_path / case / p) for p in sorted(os.listdir(bad_input(tmp_path, case)))]
    _write(path + ".1", b"")  # a later segment: the log's end is not this file's
    fifo = str(tmp_path / "rank-00009.0.msgpack")
    os.mkfifo(fifo)
    paths += [fifo, str(tmp_path / "none.msgpack"), str(tmp_path)]
    read = _same(paths)
    assert read[-3] == read[-2] == read[-1] == (None, None, None)  # (not opened: the Python reader says why)


def test_many_logs_read_in_threads_are_the_python_reader_s(tmp_path, monkeypatch):
    paths = write_clean_run(str(tmp_path / "run"), 40, 50)
    data = _bytes(paths[7])
    _write(paths[7], data[:-3])  # (a torn end among them)
    _write(paths[11], data[:len(data) // 2])  # (and one cut short: no checkpoint)
    monkeypatch.setattr(load, "PARALLEL_FROM", 8)
    monkeypatch.setattr(load, "CHUNK", 6)
    capped = segmented(paths)
    assert load._summaries(paths, 2, True, None) == [_summary(p, True, None, capped) for p in paths]


@pytest.mark.parametrize("bad", ["fifo", "foreign", "empty"])
def test_a_bad_log_among_many_read_in_threads_is_the_same_one_line(tmp_path, monkeypatch, bad):
    paths = write_clean_run(str(tmp_path / "run"), 24, 20)
    os.unlink(paths[13])
    if bad == "fifo":
        os.mkfifo(paths[13])
    else:
        _write(paths[13], b"" if bad == "empty" else b"\x93\x01\x02\x03 not a log")
    with pytest.raises(LogError) as alone:
        _summary(paths[13], True)
    monkeypatch.setattr(load, "PARALLEL_FROM", 8)
    monkeypatch.setattr(load, "CHUNK", 5)
    with pytest.raises(LogError) as among:
        load._summaries(paths, 2, True, None)
    assert str(among.value) == str(alone.value) and "\n" not in str(alone.value)


# -- every key at and beyond its bounds, any value in any key ----------------------------------------

def _packable(v) -> bool:
    return not isinstance(v, int) or isinstance(v, bool) or -(2**63) <= v < 2**64


def _edges(check) -> list:
    """Values of every type for a key checked by `check`, and those at and beyond its bounds."""
    out = [None, True, False, 0.5, -0.0, float("nan"), float("inf"), "x", "é", b"x", [], {}, {"a": 1}, -1, 0, 1,
           2, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 1e30, 2.0**64, 18446744073709549568.0]
    what = described(check)
    if what is not None and what[0] == "int":
        out += [what[1] - 1, what[1], what[2] - 1, what[2]]
    elif what is not None and what[0] == "list":
        out += [[x] for x in _edges(check.item)] + [["a", "b"], [1, "a"], [[0, 1, 2]] * 3]
    elif what is not None and what[0] == "sequence":
        out += [[1, 2, 3], [1, 2], [True, 2, 3], [-1, 2, 3], [2**64 - 1, 0, 0], [1, 2, 3, 4]]
    return [v for v in out if _packable(v)]


def _valid(kind: str, key: str):
    check = SCHEMA[kind][0][key]
    return next(v for v in [1, "x", [], [[1, 2, 3]], [0, 1]] if check(v, 1 << 20) is None)


class _Bytes(bytes):
    """A value written as these bytes (a string that is not UTF-8)."""


def _raw(*pairs) -> msgpack.ExtType:
    """A map that msgpack-python would not write (keys twice, keys that are not strings, values
    that are no msgpack-python value), kept as its bytes."""
    size = bytes((0x80 | len(pairs),)) if len(pairs) < 16 else b"\xde" + len(pairs).to_bytes(2, "big")
    return msgpack.ExtType(0, b"".join([size, *(x if isinstance(x, _Bytes) else msgpack.packb(x)
                                                 for p in pairs for x in p)]))


def _pack_raw(frames: list) -> bytes:
    """pack, with `_raw` maps written as their bytes."""
    def one(rec):
        return rec.data if isinstance(rec, msgpack.ExtType) else msgpack.packb(rec)
    return b"".join(lf.frame(b"".join(one(r) for r in recs), eid) for recs, eid in frames)


NOT_UTF8 = _Bytes(b"\xa2\xc3\x28")  # (a string of 2 bytes that are no UTF-8)


def test_every_key_of_every_kind_at_and_beyond_its_bounds(tmp_path, one_log):
    """In the header, in the checkpoint and in a record of each kind after it: each key of the
    schema set to values of every type and to its bounds and beyond; records of unknown kinds, of
    keys that are not strings or come twice, nested deeper than the pass reads."""
    frames = frames_of(one_log)
    at = max(n for n, (recs, _) in enumerate(frames) if any(r.get("k") == lf.CHECKPOINT for r in recs))
    cp = next(k for k, r in enumerate(frames[at][0]) if r.get("k") == lf.CHECKPOINT)
    first_end = len(_pack_raw(frames[:1]))
    last_start = len(one_log) - len(_pack_raw(frames[at:]))
    header, checkpoint = frames[0][0][0], frames[at][0][cp]

    def with_header(rec, colls_before: int | None = None) -> bytes:
        colls_before = frames[0][1] if colls_before is None else colls_before
        return _pack_raw([([rec, *frames[0][0][1:]], colls_before)]) + one_log[first_end:]

    def with_end(rec=None, checkpoint_rec=None, own_frame=False) -> bytes:
        """The log with its checkpoint changed, or `rec` right after it (in its frame, or after its frame)."""
        end = [(list(recs), eid) for recs, eid in frames[at:]]
        if checkpoint_rec is not None:
            end[0][0][cp] = checkpoint_rec
        if rec is not None and own_frame:
            end.append(([rec], end[-1][1]))
        elif rec is not None:
            end[0][0].insert(cp + 1, rec)
        return one_log[:last_start] + _pack_raw(end)

    variants = []
    for kind, (checks, required) in SCHEMA.items():
        for key, check in checks.items():
            for value in _edges(check):
                if kind == lf.HEADER:
                    variants.append(with_header({**header, key: value}))
                elif kind == lf.CHECKPOINT:
                    variants.append(with_end(checkpoint_rec={**checkpoint, key: value}))
                else:
                    variants.append(with_end({"k": kind, **{k: _valid(kind, k) for k in required}, key: value}))
    odd = [{"k": "?"}, {"k": ["D"]}, {"k": "Z", "zz": b"x"}, {"k": "Z", "zz": [[[[[[[[[[1]]]]]]]]]]},
           _raw((1, 2), ("k", "Z")), _raw(("k", "Z"), ("k", "C")), _raw(("k", "Z"), ("ts", 1), ("ts", "x")),
           _raw(("k", "Z"), ("ts", "x"), ("ts", 1)), {"k": "C", "o": 1, "g": 0}, {"k": "P", "n": 1, "c": []},
           _raw(("k", "Z"), ("zz", NOT_UTF8)), _raw(("k", "Z"), (NOT_UTF8, 1)), {**header, "rank": 5}, header,
           {"k": "D"}, {"k": "N", "s": 1}, {"k": "J"}, {"k": "P", "c": []},  # (these four lack a key they need)
           {"k": "Z", "ts": 5}, {"k": "D", "i": 3, "r": 4}]  # (and these are well formed: in a frame of their own, the
    # tail's records come in two parts)
    variants += [with_end(rec, own_frame=own) for rec in odd for own in (False, True)]
    for pairs in ((("more", True),), (("more", 1),), (("more", 0),), (("more", False),), (("n", 1), ("n", 2))):
        variants.append(with_end(checkpoint_rec=_raw(*checkpoint.items(), *pairs)))
    for pairs in ((("rank", 1),), (("rank", 5),), (("world", 0),), (("rank", True),), (("v", True),), (("v", 1),),
                  (("v", 3),), (("magic", "collcheck-lo"),), (("hang_s", True),)):
        variants.append(with_header(_raw(*{**header, **dict(pairs)}.items())))
        variants.append(with_header(_raw(*header.items(), *pairs)))  # (a key twice: the last one counts)
    variants += [with_header(_raw(*header.items(), ("host", NOT_UTF8))), with_header(header, 1),
                 with_header({k: v for k, v in header.items() if k != "run"})]
    paths = [_write(str(tmp_path / f"v{n}.msgpack"), v) for n, v in enumerate(variants)]
    read = _same(paths)
    heads = [r[1] is not None for v, r in zip(variants, read) if v.endswith(one_log[first_end:])]
    ends = [r[2] is not None for v, r in zip(variants, read) if v.startswith(one_log[:last_start])]
    for taken in (heads, ends):  # (the pass took some, and left some to the Python reader)
        assert 0.1 * len(taken) < sum(taken) < 0.9 * len(taken), (sum(taken), len(taken))


# -- any value in any key -------------------------------------------------------------------------

_EDGES = [0, 1, 2, -1, 255, 256, 65535, 65536, 2**30 - 1, 2**30, 2**31 - 1, 2**31, 2**20, 2**20 + 1, 2**62,
          2**63 - 1, 2**63, 2**64 - 1, -(2**63), -(2**31)]
_SCALARS = (st.none() | st.booleans() | st.sampled_from(_EDGES) | st.integers(-(2**63), 2**64 - 1)
            | st.floats(allow_nan=True, allow_infinity=True) | st.floats(width=32)
            | st.text(max_size=4) | st.sampled_from(["", "end", "é", "collcheck-log", "H", "P", "Z", "C"])
            | st.binary(max_size=3))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(max_size=3) | st.integers(0, 3), inner, max_size=3), max_leaves=8)


@pytest.fixture(scope="module")
def one_log(tmp_path_factory) -> bytes:
    return _bytes(write_clean_run(str(tmp_path_factory.mktemp("one")), 2, 30)[0])


def _changed(rec: dict, data) -> dict:
    """A record with some of its keys (those of its kind, "k", others) set to any value, or removed."""
    keys = sorted(SCHEMA[rec["k"]][0]) + ["k", "zz"]
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(keys))
        if data.draw(st.booleans()):
            rec[key] = data.draw(_VALUES)
        else:
            rec.pop(key, None)
    return rec


@settings(deadline=None, max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_value_in_the_header(tmp_path, one_log, data):
    frames = frames_of(one_log)
    header = dict(frames[0][0][0])
    if data.draw(st.booleans()):  # (a value of its type, in or out of its range)
        key = data.draw(st.sampled_from(["v", "rank", "world", "pid", "restart", "hang_s", "argv", "magic", "run"]))
        header[key] = data.draw(st.sampled_from(_EDGES) | st.sampled_from([[], ["a", 1], 2.5, -0.0, 1e30]))
    else:
        _changed(header, data)
    frames[0][0][0] = header
    _same([_write(str(tmp_path / "h.msgpack"), pack(frames))])


@settings(deadline=None, max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_record_after_the_checkpoint(tmp_path, one_log, data):
    frames = frames_of(one_log)
    at = max(n for n, (recs, _) in enumerate(frames) if any(r.get("k") == lf.CHECKPOINT for r in recs))
    kind = data.draw(st.sampled_from(sorted(SCHEMA)))
    rec = {"k": kind}
    for key, _ in zip(sorted(SCHEMA[kind][0]), range(data.draw(st.integers(0, 4)))):
        rec[key] = data.draw(st.sampled_from(_EDGES) | st.sampled_from(["x", [], [1, 2, 3], [[1, 2, 3]], 0.5]))
    rec = _changed(rec, data) if data.draw(st.booleans()) else rec
    where = data.draw(st.sampled_from(["checkpoint's frame", "own frame", "trailer's frame", "checkpoint"]))
    if where == "checkpoint":  # (the checkpoint itself changed)
        cp = next(r for r in frames[at][0] if r.get("k") == lf.CHECKPOINT)
        _changed(cp, data)
    elif where == "checkpoint's frame":
        frames[at][0].append(rec)
    elif where == "own frame":
        frames.insert(at + 1, ([rec], frames[at][1]))
    else:
        frames[-1][0].insert(0, rec)
    _same([_write(str(tmp_path / "t.msgpack"), pack(frames))])


@settings(deadline=None, max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(junk=st.binary(max_size=1500), keep=st.integers(0, 400), head=st.binary(max_size=40))
def test_any_bytes_at_either_end(tmp_path, one_log, junk, keep, head):
    _same([_write(str(tmp_path / "j.msgpack"), one_log[:len(one_log) - keep] + junk),
           _write(str(tmp_path / "k.msgpack"), head + one_log[len(head):]),
           _write(str(tmp_path / "m.msgpack"), one_log[:len(one_log) - keep] + msgpack.packb({"k": "Z"}))])
