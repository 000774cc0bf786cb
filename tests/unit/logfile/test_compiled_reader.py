"""The compiled log reader (collcheck/logfile/compiled.py, native/logscan.c) gives exactly the scan
the Python loop gives, on clean logs and on logs changed in every way a file can be: a value of
another type or range in any key of a collective (all collectives of its op, so that the compiled
loop has learned their template), keys added and removed, bytes flipped, cut, repeated or
inserted; and it takes most of a clean log itself (else it would be a slower copy)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support import examples
from support.logbytes import assert_same, both, frames_of, pack

from collcheck.logfile import compiled, fastscan
from collcheck.logfile.scan import scan_bytes
from collcheck.synth import write_clean_run

pytestmark = pytest.mark.skipif(compiled.library() is None, reason="no C compiler here: the Python loop reads alone")


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> bytes:
    """A log as collcheck.synth writes it: 8 call sites repeated, a subgroup, completions."""
    d = tmp_path_factory.mktemp("clean")
    paths = write_clean_run(str(d), 4, 400, groups=[[0, 2], [1, 3]])
    with open(paths[0], "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def long(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("long")
    with open(write_clean_run(str(d), 2, 3200)[0], "rb") as f:
        return f.read()


@pytest.mark.parametrize("steps", [False, True])
def test_a_clean_log_reads_the_same_and_the_compiled_loop_takes_most_of_it(clean, monkeypatch, steps):
    """Also with an optimizer step's record in most collectives' frames (what a training loop's
    log holds: the step waits in the recorder for the next collective)."""
    taken = []
    add = fastscan._add
    monkeypatch.setattr(fastscan, "_add", lambda scanner, batch, out: (taken.append(out.n), add(scanner, batch, out)))
    log = clean
    if steps:
        frames = frames_of(clean)
        for n, (recs, _) in enumerate(frames):
            if recs and recs[-1].get("k") == "C" and n % 3:
                recs.insert(0, {"k": "O", "ts": recs[-1]["ts"] - 1, "o": 0})
        log = pack(frames)
    for kw in ({}, {"times": True}, {"keep_seq": True}, {"limit": 123}, {"limit": 1}):
        assert_same(log, **kw)
    taken.clear()
    a, _ = both(log, times=True)
    assert sum(taken) >= 0.9 * len(a.sig), (sum(taken), len(a.sig))  # (the first of each template: Python's)
    assert len(a.steps) == (sum(1 for recs, _ in frames_of(log) for r in recs if r["k"] == "O"))


def test_more_templates_than_the_compiled_loop_keeps_read_the_same(long):
    """1,500 templates (chains), each collective's repeated: past the compiled loop's table the
    Python loop takes them, and the scan is the same."""
    frames = frames_of(long)
    colls = [rec for recs, _ in frames for rec in recs if rec.get("k") == "C"]
    for i, rec in enumerate(colls):
        rec["ch"] = (i // 2) % 1500
    assert_same(pack(frames), times=True)


ints = st.sampled_from([0, 1, 7, 2**15, 2**31 - 1, 2**31, 2**53, 2**63 - 1, 2**63, 2**64 - 1, -1, -2**31 - 1, -2**63])
leaf = st.none() | st.booleans() | ints | st.floats(allow_nan=False) | st.text(max_size=3)
values = leaf | st.lists(leaf, max_size=3) | st.lists(st.lists(ints, max_size=4), max_size=3)
keys = ["o", "g", "t", "r", "p", "s", "ch", "ts", "j", "d", "u", "l", "a", "n", "x", "tag", "zz"]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_collectives_changed_read_the_same(clean, data):
    """Every collective of one op (or one of them only) with a key set to any value or removed."""
    frames = frames_of(clean)
    ops = sorted({rec["o"] for recs, _ in frames for rec in recs if rec.get("k") == "C"})
    op = data.draw(st.sampled_from(ops))
    changes = data.draw(st.lists(st.tuples(st.sampled_from(keys), st.booleans(), values), min_size=1, max_size=3))
    only = data.draw(st.sampled_from([None, 0, 5, 40]))
    seen = 0
    for recs, _ in frames:
        for rec in recs:
            if rec.get("k") != "C" or rec.get("o") != op:
                continue
            seen += 1
            if only is not None and seen != only + 1:
                continue
            for key, keep, value in changes:
                if keep:
                    rec[key] = value
                else:
                    rec.pop(key, None)
    try:
        log = pack(frames)
    except (OverflowError, ValueError, TypeError):  # (not packable: nothing a file can hold)
        return
    assert_same(log, times=True)
    assert_same(log, keep_seq=True, limit=data.draw(st.sampled_from([None, 50, 1000])))


side = st.fixed_dictionaries({"k": st.sampled_from(list("OYNXQZWLAUDGSPJ?"))},
                             optional={key: values for key in ("ts", "o", "s", "i", "w", "m", "t", "x", "f", "h")})


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_records_before_a_collective_in_its_frame_read_the_same(clean, data):
    """Records of any kind and values (steps, syncs, exceptions... and the kinds that touch the
    collectives: completions, groups, strings) in a collective's frame before it, as the recorder
    writes what waited for the next collective."""
    frames = frames_of(clean)
    every = data.draw(st.sampled_from([3, 10, 40]))
    drawn = data.draw(st.lists(st.lists(side, min_size=1, max_size=2), min_size=1, max_size=6))
    for n, (recs, _) in enumerate(frames):
        if n % every == 0 and recs and recs[-1].get("k") == "C":
            recs[:0] = drawn[n // every % len(drawn)] if n % (every * 4) == 0 else [{"k": "O", "ts": 1, "o": 0}]
    try:
        log = pack(frames)
    except (OverflowError, ValueError, TypeError):
        return
    assert_same(log, times=True)


def test_completions_and_errors_before_a_collective_in_its_frame_read_the_same(clean):
    """A D record (the previous collective's completion, or its error) before a collective whose
    own completions name the same event: the first completion read gives its time."""
    frames = frames_of(clean)
    for n, (recs, eid) in enumerate(frames):
        if recs and recs[-1].get("k") == "C" and eid > 0 and n % 3 == 0:
            done = {"k": "D", "i": eid - 1, "r": recs[-1]["ts"] - 7, "c": recs[-1]["ts"] - 5}
            recs.insert(0, done if n % 2 else {**done, "e": "RuntimeError: peer lost"})
    assert_same(pack(frames), times=True)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_damaged_bytes_read_the_same(clean, data):
    """Bytes flipped, a stretch cut out, repeated (a copied chunk) or filled with zeros, the tail cut."""
    log = bytearray(clean)
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "repeat", "zeros", "tail"]))
        at = data.draw(st.integers(0, len(log) - 1))
        size = data.draw(st.integers(1, 400))
        if kind == "flip":
            log[at] ^= data.draw(st.integers(1, 255))
        elif kind == "cut":
            del log[at:at + size]
        elif kind == "repeat":
            log[at:at] = log[at:at + size]
        elif kind == "zeros":
            log[at:at + size] = bytes(len(log[at:at + size]))
        else:
            del log[at:]
        if not log:
            return
    assert_same(bytes(log), times=True)


def test_the_python_loop_alone_when_told_or_without_a_compiler(tmp_path):
    """COLLCHECK_READER=python, a compiler that fails (its error kept, not tried again), caching off:
    no compiled loop, and the reading goes on."""
    code = ("from collcheck.logfile import compiled, summaries\n"
            "print(compiled.library() is None, not summaries.compiled_summaries())")  # (and the logs' summaries' pass)
    cases = [({"COLLCHECK_READER": "python"}, "True True"), ({"COLLCHECK_CACHE": ""}, "True True"),
             ({"COLLCHECK_CACHE": str(tmp_path / "broken"), "CC": "false"}, "True True"),
             ({"COLLCHECK_CACHE": str(tmp_path / "fresh")}, "False False")]
    for env, says in cases:
        done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
                              text=True, timeout=120)
        assert done.stdout.strip() == says, (env, done.stdout, done.stderr)
    assert [p.name.endswith(".so.failed") for p in (tmp_path / "broken").iterdir()] == [True]
    assert any(p.name.endswith(".so") for p in (tmp_path / "fresh").iterdir())
