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


def running_run(directory: str, world: int = 16, culprit: int = 7, slot: int = 20) -> list[str]:
    """A running job's logs as live mode's answer leaves them (no trailer, a checkpoint at their
    end), `culprit` issuing another shape at collective `slot`."""
    prog = synth.Program(world, {"0": tuple(range(world))}, [])
    s = prog.add_site()
    prog.ops = [synth.Op("allreduce_", "0", (("float32", (8 + j % 3,)),), 0, site=s) for j in range(40)]
    return synth.write_run(directory, prog, [synth.Fault("shape_mismatch", culprit, slot)], trailer=False,
                           checkpoint="share")


def both_ways_running(directory: str, monkeypatch, world: int = 16) -> tuple:
    """both_ways, every rank running."""
    folded = analyse(load_run(directory, running=set(range(world))))
    with monkeypatch.context() as m:
        m.setattr(load, "FOLD_FROM", 1 << 30)
        whole = analyse(load_run(directory, running=set(range(world))))
    return folded, whole


def test_running_logs_that_end_with_a_checkpoint_fold_and_read_as_rank_by_rank(tmp_path, monkeypatch):
    running_run(str(tmp_path))
    folded, whole = both_ways_running(str(tmp_path), monkeypatch)
    assert len({id(log.sig) for log in folded.run.ranks.values()}) == 2  # the clean kind and the culprit
    assert len({id(log.sig) for log in whole.run.ranks.values()}) == 16
    assert outcome(folded) == outcome(whole)
    assert [(f.kind, f.position, f.ranks) for f in folded.findings][:1] == [("shape_mismatch", 20, [7])]
    assert {log.state for log in folded.run.ranks.values()} == {"running"}


def _one_more_collective(path: str) -> None:
    """Append a copy of the log's last collective, its next one, after its checkpoint."""
    from collcheck.logfile.reader import LogStream, read_bytes

    records = [rec for _, rec, _ in LogStream(read_bytes(path), path)]
    last = dict(next(r for r in reversed(records) if r.get("k") == lf.COLL))
    last.pop("d", None)
    checkpoint = next(r for r in reversed(records) if r.get("k") == lf.CHECKPOINT)
    w = LogWriter(os.open(path, os.O_WRONLY | os.O_APPEND), path)
    w.colls = checkpoint["n"]
    with w.lock:
        w.write({**last, "j": last["j"] + 1, "ts": last["ts"] + 100}, checkpoint["n"])
    w.close()


def test_a_rank_whose_log_went_on_after_its_checkpoint_is_read_in_full(tmp_path, monkeypatch):
    """A collective after the last checkpoint: the checkpoint does not stand for the log, which is
    read in full (its extra collective found), never folded with the ranks it equalled there."""
    paths = running_run(str(tmp_path))
    _one_more_collective(paths[3])
    folded, whole = both_ways_running(str(tmp_path), monkeypatch)
    assert folded.run.ranks[3].like is None and len(folded.run.ranks[3]) == 41
    assert {len(log) for r, log in folded.run.ranks.items() if r != 3} == {40}
    assert len({id(log.sig) for log in folded.run.ranks.values()}) == 3
    assert outcome(folded) == outcome(whole)


def test_the_end_of_a_log_is_read_by_its_kind_and_never_in_full(tmp_path, monkeypatch):
    """Logs that hold only their header and checkpoint (live mode's `tail` answers) read as ranks of
    their kind: the run's analysis is that of every log whole. With no log of their kind whole,
    they are left out and said, never read as ranks that issued nothing."""
    from collcheck.capture.live.share import end_of_log
    from collcheck.logfile.reader import read_header
    from collcheck.logfile.tail import read_tail

    whole_dir, tails_dir = tmp_path / "whole", tmp_path / "tails"
    whole_dir.mkdir()
    tails_dir.mkdir()
    running_run(str(whole_dir), world=6, culprit=4)
    paths = running_run(str(tails_dir), world=6, culprit=4)
    for rank in (1, 2, 3, 5):
        header, checkpoint = read_header(paths[rank]), read_tail(paths[rank]).checkpoint
        with open(paths[rank], "wb") as f:
            f.write(end_of_log(header, checkpoint, checkpoint["n"]))
    shared, whole = both_ways_running(str(tails_dir), monkeypatch, 6)[0], both_ways_running(str(whole_dir),
                                                                                              monkeypatch, 6)[1]
    assert shared.run.ranks[2].like is shared.run.ranks[0] and {len(log) for log in shared.run.ranks.values()} == {40}
    assert outcome(shared) == outcome(whole)
    os.unlink(paths[0])  # the only whole log of the clean kind
    run = load_run(str(tails_dir), running=set(range(6)))
    assert sorted(run.ranks) == [4]
    assert "rank(s) 1-3,5: only the end of the log came (its checkpoint), and no log of the same kind came whole: " \
           "not read" in run.warnings
    assert not any("no log for rank(s) 1" in w for w in run.warnings)


def test_what_comes_as_the_end_of_a_log_and_is_not_one_of_its_rank_is_left_out_and_said(tmp_path):
    """`ends` are data: junk, or the end of another rank's log, is no rank of the run."""
    from collcheck.capture.live.share import end_of_log
    from collcheck.logfile.reader import read_header
    from collcheck.logfile.tail import read_tail

    paths = running_run(str(tmp_path), world=4, culprit=3)
    header, checkpoint = read_header(paths[1]), read_tail(paths[1]).checkpoint
    for rank in (1, 2):
        os.unlink(paths[rank])
    run = load_run(str(tmp_path), running=set(range(4)), ends={1: b"\x00junk" * 50, 2: end_of_log(header, checkpoint, 40)})
    assert sorted(run.ranks) == [0, 3]
    assert "rank(s) 1-2: what came as the end of the log was not one: not read" in run.warnings
    run = load_run(str(tmp_path), running=set(range(4)), ends={1: end_of_log(header, checkpoint, 40)})
    assert sorted(run.ranks) == [0, 1, 3] and run.ranks[1].like is run.ranks[0] and len(run.ranks[1]) == 40


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
