"""Ranks of one kind are read once (model/load.py): the analysis of a run read that way is the
analysis of the run read rank by rank, and thousands of identical ranks share one set of columns."""

from __future__ import annotations

import os
import random
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples

from collcheck import synth
from collcheck.analysis.diff import analyse
from collcheck.logfile import format as lf
from collcheck.logfile.checkpoint import checkpoint_record
from collcheck.logfile.writer import LogWriter
from collcheck.model import load, load_run
from collcheck.synth.bulk import BARRIER, Divergence, world_body_op, write_clean_run

SETTINGS = settings(deadline=None, max_examples=examples(2), suppress_health_check=[HealthCheck.too_slow])


def outcome(report) -> tuple:
    """What a user reads off a report: verdict, findings, their messages, the warnings."""
    return (report.verdict, [(f.kind, f.group, f.position, f.ranks, f.message) for f in report.findings],
            sorted(report.run.warnings))


def both_ways(directory: str, monkeypatch) -> tuple:
    """(report read by kinds, report read rank by rank)."""
    folded = analyse(load_run(directory))
    with monkeypatch.context() as m:
        m.setattr(load, "FOLD_FROM", 1 << 30)
        whole = analyse(load_run(directory))
    return folded, whole


@pytest.mark.parametrize("kind", synth.FAULT_KINDS)
@SETTINGS
@given(world=st.integers(8, 10), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_a_run_read_by_kinds_reads_as_rank_by_rank(kind, world, seed, data):
    """Every fault kind the synthetic programs know, at 8-10 ranks: the same verdict, findings,
    messages and warnings either way."""
    prog = synth.generate_program(random.Random(seed), world, 24, groups=2)
    candidates = synth.fault_candidates(prog, kind)
    faults = [data.draw(st.sampled_from(candidates))] if candidates else []
    mp = pytest.MonkeyPatch()
    try:
        with tempfile.TemporaryDirectory() as d:
            synth.write_run(d, prog, faults, done=data.draw(st.booleans()))
            folded, whole = both_ways(d, mp)
            assert outcome(folded) == outcome(whole)
    finally:
        mp.undo()


@pytest.mark.parametrize("kind", ["missing", "shape", "extra"])
def test_one_rank_out_of_step_among_many_is_found_exactly(tmp_path, kind):
    """128 ranks in four subgroups whose programs are alike (in groups 1 and 3, and 2 and 4, the
    logs' own group ids, counts and hashes are equal: only the groups' names and members tell
    them apart), one rank out of step at a random slot: exactly that finding and no other, one
    log read in full per subgroup and the odd one."""
    rng = random.Random(kind)
    rank, slot = rng.randrange(128), rng.randrange(1, 500)
    while kind == "shape" and world_body_op(slot, True) == BARRIER:
        slot += 1
    write_clean_run(str(tmp_path), 128, 1024, groups=[list(range(k, 128, 4)) for k in range(4)],
                    diverge=Divergence(rank, slot, kind))
    report = analyse(load_run(str(tmp_path)))
    expected = {"missing": "missing", "shape": "shape_mismatch", "extra": "extra"}[kind]
    assert [(f.kind, f.group, f.position, f.ranks) for f in report.findings] == [(expected, "0", slot, [rank])]
    assert len({id(log.sig) for log in report.run.ranks.values()}) == 5


def test_a_rank_without_a_checkpoint_at_its_end_is_read_in_full(tmp_path):
    """A log cut before its checkpoint (killed), and one with a collective after it, stand alone."""
    paths = write_clean_run(str(tmp_path), 16, 200)
    with open(paths[3], "r+b") as f:  # killed: the last frame (checkpoint, trailer) is gone
        data = f.read()
        f.truncate(data.rindex(bytes((lf.FRAME_MARK,))))
    run = load_run(str(tmp_path))
    assert run.ranks[3].like is None and not run.ranks[3].trailer and run.ranks[3].state == "killed-in-collective"
    assert sum(log.like is None for log in run.ranks.values()) == 2
    assert all(log.trailer for r, log in run.ranks.items() if r != 3)


def test_a_folded_rank_keeps_its_own_error_and_exception_text(tmp_path, monkeypatch):
    """Ranks of one kind whose error texts differ (they name the rank): each keeps its own."""
    prog = synth.Program(8, {"0": tuple(range(8))}, [])
    s = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=s)] * 3
    paths = synth.write_run(str(tmp_path), prog, trailer=False)
    for rank, path in enumerate(paths):  # each rank: its last collective raised, then the process did
        w = LogWriter(os.open(path, os.O_WRONLY | os.O_APPEND), path)
        w.colls = 3  # (the frames go on counting the collectives before them)
        with w.lock:
            w.write(checkpoint_record(3, [(0, 3, 7)], "exception", [2], [], 1))
            w.write({"k": lf.DONE, "i": 2, "r": 400, "e": f"RuntimeError: rank {rank} timed out"})
            w.write({"k": lf.EXCEPTION, "t": "RuntimeError", "m": f"rank {rank} gave up", "ts": 500})
        w.close()
    folded, whole = both_ways(str(tmp_path), monkeypatch)
    assert len({id(log.sig) for log in folded.run.ranks.values()}) == 1
    for rank in range(8):
        log = folded.run.ranks[rank]
        assert log.errors == {2: f"RuntimeError: rank {rank} timed out"}
        assert log.exception[:2] == ("RuntimeError", f"rank {rank} gave up")
        assert log.state == whole.run.ranks[rank].state == "raised"
    assert outcome(folded) == outcome(whole)


def test_a_rank_built_from_its_kind_is_the_rank_built_from_its_kinds_scan(tmp_path):
    """RankLog.of_kind (thousands of ranks built from their kind's attributes) gives each rank what
    RankLog(run, <the kind's scan with this log's path, header, error texts, exception>, like=first)
    gives: every attribute, on a run of two kinds (their last collective raised, each rank with its
    own text; a clean end), a rank with no checkpoint and a SIGTERM dump beside one log."""
    from dataclasses import replace

    from collcheck.logfile.scan import scan_file
    from collcheck.model import RankLog, Signature

    prog = synth.Program(16, {"0": tuple(range(16))}, [])
    s = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8,)),), 0, site=s)] * 3
    paths = synth.write_run(str(tmp_path), prog, trailer=False)
    for rank, path in enumerate(paths[:15]):  # rank 15: killed before a checkpoint
        w = LogWriter(os.open(path, os.O_WRONLY | os.O_APPEND), path)
        w.colls = 3
        with w.lock:
            if rank < 8:
                w.write(checkpoint_record(3, [(0, 3, 7)], "exception", [2], [], 1))
                w.write({"k": lf.DONE, "i": 2, "r": 400, "e": f"RuntimeError: rank {rank} timed out"})
                w.write({"k": lf.EXCEPTION, "t": "RuntimeError", "m": f"rank {rank} gave up", "ts": 500})
            else:
                w.write(checkpoint_record(3, [(0, 3, 7)], "end", [], [], 1))
        w.close()
    with open(paths[5][: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX, "w") as f:
        f.write('Current thread 0x1 (most recent call first):\n  File "train.py", line 7 in step\n')
    run = load_run(str(tmp_path))
    folded = [log for log in run.ranks.values() if log.like is not None]
    assert len(folded) == 13 and len({log.like.rank for log in folded}) == 2 and run.ranks[15].like is None
    assert run.ranks[5].sigterm_dump and not run.ranks[4].sigterm_dump
    assert run.ranks[6].errors == {2: "RuntimeError: rank 6 timed out"}
    scans = {}
    for log in folded:
        first = log.like
        scan = scans[first.path] = scans.get(first.path) or scan_file(first.path)
        sig_map = [run.sig_id(Signature(*t)) for t in scan.signatures]
        old = RankLog(run, replace(scan, path=log.path, header=log.header, errors=log.errors,
                                   exception=log.exception), sig_map, like=first)
        old.running = log.running
        assert comparable(old) == comparable(log), log.rank
    assert run.ranks[5].dump_site == ("train.py", 7, "step")


def comparable(log) -> dict:
    """A rank's attributes, its scan's event-id lookup by what it gives and its tables (decoded
    again by the test's own scan) by kind."""
    out = dict(vars(log))
    out["eid_of"] = [log.eid_of(i) for i in range(len(log))]
    out["tables"] = type(log.tables)
    return out
