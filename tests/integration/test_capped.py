"""Bounded logs (COLLCHECK_MAX_MB): segments, the oldest deleted, each readable on its own, and
`diff` aligning what every rank kept by the groups' sequence numbers."""

from __future__ import annotations

import os

import pytest

from collcheck.logfile import format as lf
from collcheck.logfile.reader import segment_paths
from support.cli import diff_json, run_cli
from support.corpus import CAPPED_STEPS
from support.jobs import job, launch, marker_lines, program

LONG = program("long_run.py")


def kept_bytes(run_dir: str, rank: int) -> tuple[str, list[str], int]:
    first = os.path.join(run_dir, f"rank-{rank:05d}.0{lf.LOG_SUFFIX}")
    segs = segment_paths(first)
    return first, segs, os.path.getsize(first) + sum(os.path.getsize(s) for s in segs)


@pytest.mark.slow
@pytest.mark.recordings("capped_uneven")
def test_logs_wrapped_at_different_points_give_no_finding(corpus):
    """Rank 0 issues three times as many collectives on its own group as rank 1: their logs
    drop different amounts of the world group's history; what both kept lines up."""
    rec = corpus("capped_uneven")
    assert rec.rc == 0, rec.tail()
    run_dir = rec.run_dir
    cap = 0.25 * 1024 * 1024
    starts = []
    for rank in (0, 1):
        first, segs, total = kept_bytes(run_dir, rank)
        assert segs and int(segs[0].rsplit(".", 1)[1]) > 1  # wrapped
        assert total <= cap + max(os.path.getsize(s) for s in segs) + 64 * 1024, total
        starts.append(int(segs[0].rsplit(".", 1)[1]))
    assert starts[0] != starts[1]
    code, report = diff_json(run_dir)
    assert code == 0 and report["findings"] == []
    assert any("checked from #" in w for w in report["warnings"])


@pytest.mark.slow
@pytest.mark.recordings("capped_p2p")
def test_wrapped_point_to_point_channels_give_no_finding(corpus):
    """Sends and recvs in logs that wrapped at different points: each channel is compared from
    the first message both sides kept (their `j`), not from each side's first kept op."""
    rec = corpus("capped_p2p")
    assert rec.rc == 0, rec.tail()
    run_dir = rec.run_dir
    assert all(kept_bytes(run_dir, rank)[1] for rank in (0, 1))  # both wrapped
    code, report = diff_json(run_dir)
    assert code == 0 and report["findings"] == [], report["findings"][:2]


@pytest.mark.slow
@pytest.mark.recordings("capped_divergence")
def test_divergence_near_the_end_of_a_wrapped_log(corpus):
    rec = corpus("capped_divergence")
    assert rec.rc != 0, rec.tail()
    run_dir = rec.run_dir
    for rank in (0, 1):  # both wrapped: their first kept segments are past the first
        _, segs, _ = kept_bytes(run_dir, rank)
        assert segs and int(segs[0].rsplit(".", 1)[1]) > 1, segs
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert code == 1 and first["kind"] == "op_mismatch" and first["ranks"] == [1]
    assert first["group"] == "0" and first["position"] == CAPPED_STEPS  # the world group's collective #1200
    sites = {e["rank"]: e["site"] for e in first["events"].values() if e}
    assert sites[1]["line"] == marker_lines(LONG)["diverge"]
    # the TUI's grid: the finding's row is numbered #1200 and holds rank 1's broadcast
    from collcheck.analysis.diff import analyse
    from collcheck.model import load_run
    from collcheck.tui.grid import Grid, finding_row

    report = analyse(load_run(run_dir))
    grid = Grid(report, "0")
    row = finding_row(grid, report.first)
    assert grid.number(*grid.slot(row)) == CAPPED_STEPS
    assert report.run.ranks[1].event(grid.index(1, row)).sig.op == "broadcast_"
    for log in report.run.ranks.values():  # a wrapped log read in one pass: the same events
        assert log.events() == [log.event(i) for i in range(len(log))]
    # `show` numbers it the same
    shown = run_cli("show", kept_bytes(run_dir, 1)[0], "--limit", "2", columns=200).out
    assert any("broadcast" in line and f"│ {CAPPED_STEPS} │" in line for line in shown.splitlines()), shown


# COLLCHECK_TEST_CAPPED_STEPS=500000 makes it 2 million collectives in 8 MB (about 25 minutes here)
SCALE_STEPS = int(os.environ.get("COLLCHECK_TEST_CAPPED_STEPS", "60000"))


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_hundreds_of_thousands_of_collectives_in_a_capped_log(tmp_path):
    """Rank 0 issues 4 collectives a step, rank 1 2, for SCALE_STEPS steps, under a cap that grows
    with the steps as 8 MB does for 500,000 (a fraction of the whole log): each rank keeps at most
    the cap plus one segment, and the divergence at the end is found."""
    steps = SCALE_STEPS
    cap_mb = max(0.25, round(8 * steps / 500_000, 2))
    rec = launch(job(LONG, args=(steps + 10, steps), env={"COLLCHECK_MAX_MB": str(cap_mb)}, timeout=3500),
                 str(tmp_path))
    assert rec.rc not in (0, None), rec.tail()
    run_dir = rec.run_dir
    for rank in (0, 1):
        _, segs, total = kept_bytes(run_dir, rank)
        assert segs and total <= cap_mb * 1024 * 1024 + max(os.path.getsize(s) for s in segs), total
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert code == 1 and first["kind"] == "op_mismatch" and first["group"] == "0" and first["position"] == steps
    sites = {e["rank"]: e["site"] for e in first["events"].values() if e}
    assert sites[1]["line"] == marker_lines(LONG)["diverge"]
