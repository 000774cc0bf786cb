"""Completion where the backend's future cannot say it (NCCL: a CUDA future, complete at enqueue):
the recorder polls `is_completed()` from its own thread (capture/poller.py). On the simulated NCCL
backend, whose futures and blocking calls behave as NCCL's, and on gloo with
COLLCHECK_COMPLETION=poll through the compiled path (its own C++ list of polled Works): rank 1 comes
1 s late (programs/polled_completion.py), so rank 0's all-reduces return at once and complete
about 1 s later. Were the completion taken from the future (or the return), it would read as
immediate and these tests fail."""

from __future__ import annotations

import glob
import os

import pytest
from support.cli import diff_json, run_cli

from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log
from collcheck.model import load_run

LATE_US = 1_000_000  # programs/polled_completion.py: LATE_S
CLOCKS_US = 5_000  # two ranks' wall clocks, each read once at their start, may differ by this


def _all_reduces(run_dir: str, rank: int) -> list:
    log = load_run(run_dir).ranks[rank]
    return [e for e in (log.event(i) for i in range(len(log))) if e.sig.op == "allreduce_"]


def _group_records(run_dir: str, rank: int) -> list[dict]:
    path, = glob.glob(os.path.join(run_dir, f"rank-{rank:05d}.*{lf.LOG_SUFFIX}"))
    return [r for r in read_log(path).records if r.get("k") == lf.GROUP]


def _check_late(run_dir: str, which: tuple[str, ...]) -> None:
    """Rank 0's all-reduces named in `which` ("async", "blocking": in program order) returned at
    once and completed when rank 1 came, within the polling interval (and the scheduler's slack).
    Times are taken against rank 1's own issue (one host, one clock), so a slow start on either
    rank cannot move them."""
    early, late = _all_reduces(run_dir, 0), _all_reduces(run_dir, 1)
    assert len(early) == len(late) == 2, (early, late)
    for name, e, partner in zip(("async", "blocking"), early, late, strict=True):
        if name not in which:
            continue
        assert e.t_return - e.t_issue < LATE_US * 0.5, (name, e)
        assert partner.t_issue - e.t_return > LATE_US * 0.5, (name, e, partner)  # returned long before
        assert e.t_done is not None and e.t_done >= partner.t_issue - CLOCKS_US, (name, e, partner)
        # seen within the polling's slack, not at the exit's last poll (0.5 s later still)
        assert e.t_done - partner.t_issue < LATE_US * 0.4, (name, e, partner)


@pytest.mark.recordings("polled@simnccl")
def test_simnccl_completion_comes_from_is_completed(corpus):
    rec = corpus("polled@simnccl")
    assert rec.rc == 0, rec.tail()
    assert "rank 0 sums 8.0 8.0" in rec.stdout, rec.tail()
    _check_late(rec.run_dir, ("async", "blocking"))
    # rank 1 came last: its own all-reduces completed as soon as it issued them
    for e in _all_reduces(rec.run_dir, 1):
        assert e.t_done - e.t_issue < LATE_US * 0.5, e
    # every group polled, and the reports say how fine the times are
    assert all(r.get("cp") == 1 for r in _group_records(rec.run_dir, 0) if r.get("op") == "seen")
    assert load_run(rec.run_dir).poll_ms == 5.0
    code, report = diff_json(rec.run_dir)
    assert code == 0 and report["completion_poll_ms"] == 5.0, report
    assert "completion times polled every 5 ms" in run_cli("diff", rec.run_dir).out
    assert "completion times polled every 5 ms" in run_cli("stats", rec.run_dir).out


@pytest.mark.slow
@pytest.mark.recordings("polled@gloo+poll")
def test_compiled_path_polls_every_work_when_asked(corpus):
    """gloo's futures are truthful (auto polls nothing there); COLLCHECK_COMPLETION=poll makes the
    compiled path keep its Works for the poller too: the async all-reduce's completion is seen there."""
    rec = corpus("polled@gloo+poll")
    assert rec.rc == 0, rec.tail()
    assert "compiled fast path in use" in rec.stderr, rec.stderr[-2000:]
    _check_late(rec.run_dir, ("async",))
    assert all(r.get("cp") == 1 for r in _group_records(rec.run_dir, 0) if r.get("op") == "seen")
