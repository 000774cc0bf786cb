"""Bounded logs (COLLCHECK_MAX_MB): segments, the oldest deleted, each readable on its own, and
`diff` aligning what every rank kept by the groups' sequence numbers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import diff_json, marker_lines, program, torchrun

from collcheck import logformat as lf
from collcheck.capture.writer import LogWriter, open_exclusive
from collcheck.reader import read_log, segment_paths

LONG = program("long_run.py")


def kept_bytes(run_dir: str, rank: int) -> tuple[str, list[str], int]:
    first = os.path.join(run_dir, f"rank-{rank:05d}.0{lf.LOG_SUFFIX}")
    segs = segment_paths(first)
    return first, segs, os.path.getsize(first) + sum(os.path.getsize(s) for s in segs)


def test_segments_read_on_their_own(tmp_path):
    fd, path = open_exclusive(str(tmp_path), "rank-00000.0")
    w = LogWriter(fd, path, max_bytes=200_000)
    header = {"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "r"}
    with w.lock:
        w.write(header)
        w.keep({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "r": [0]})
        for i in range(20_000):
            site = w.site_id("/x/train.py", 10 + i % 50, "step")
            w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": i, "s": site, "j": i}, i)
    w.close()
    segs = segment_paths(path)
    total = os.path.getsize(path) + sum(os.path.getsize(s) for s in segs)
    assert int(segs[0].rsplit(".", 1)[1]) > 1  # the oldest later segments were deleted ...
    assert os.path.exists(path) and total <= 200_000 + w.counters.segment_bytes + 4096  # ... the first kept
    for seg in segs:  # each segment: the header, every string, site and group its records need
        raw = read_log(seg)
        assert raw.header["seg"] == int(seg.rsplit(".", 1)[1]) and not raw.damage and not raw.torn
        strings = {r["i"] for r in raw.records if r["k"] == "S"}
        sites = {r["i"] for r in raw.records if r["k"] == "F"}
        colls = [r for r in raw.records if r["k"] == "C"]
        assert colls and all(c["o"] in strings and c["s"] in sites for c in colls)
        assert any(r["k"] == "G" and r["gid"] == 0 for r in raw.records)


@pytest.mark.timeout(240)
def test_logs_wrapped_at_different_points_give_no_finding(tmp_path):
    """Rank 0 issues three times as many collectives on its own group as rank 1: their logs
    drop different amounts of the world group's history; what both kept lines up."""
    rc, _, err, run_dir = torchrun(LONG, 2, tmp_path, env={"COLLCHECK_MAX_MB": "0.25"}, timeout=180,
                                   args=("3000",))
    assert rc == 0, err[-3000:]
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


@pytest.mark.timeout(240)
def test_wrapped_point_to_point_channels_give_no_finding(tmp_path):
    """Sends and recvs in logs that wrapped at different points: each channel is compared from
    the first message both sides kept (their `j`), not from each side's first kept op."""
    rc, _, err, run_dir = torchrun(LONG, 2, tmp_path, env={"COLLCHECK_MAX_MB": "0.25"}, timeout=180,
                                   args=("2000", "-1", "p2p"))
    assert rc == 0, err[-3000:]
    assert all(kept_bytes(run_dir, rank)[1] for rank in (0, 1))  # both wrapped
    code, report = diff_json(run_dir)
    assert code == 0 and report["findings"] == [], report["findings"][:2]


@pytest.mark.timeout(240)
def test_divergence_near_the_end_of_a_wrapped_log(tmp_path):
    rc, _, _, run_dir = torchrun(LONG, 2, tmp_path, env={"COLLCHECK_MAX_MB": "0.25"}, timeout=180,
                                 args=("3000", "2990"))
    assert rc != 0
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert code == 1 and first["kind"] == "op_mismatch" and first["ranks"] == [1]
    assert first["group"] == "0" and first["position"] == 2990  # the world group's 2991st collective
    sites = {e["rank"]: e["site"] for e in first["events"].values() if e}
    assert sites[1]["line"] == marker_lines(LONG)["diverge"]
    # the TUI's grid: the finding's row is numbered #2990 and holds rank 1's broadcast
    from collcheck.analysis.diff import analyse
    from collcheck.model import load_run
    from tui.grid import Grid, finding_row

    report = analyse(load_run(run_dir))
    grid = Grid(report, "0")
    row = finding_row(grid, report.first)
    assert grid.number(*grid.slot(row)) == 2990
    assert report.run.ranks[1].event(grid.index(1, row)).sig.op == "broadcast_"
    for log in report.run.ranks.values():  # a wrapped log read in one pass: the same events
        assert log.events() == [log.event(i) for i in range(len(log))]
    # `show` numbers it the same
    shown = subprocess.run([sys.executable, "-m", "collcheck.cli", "show", kept_bytes(run_dir, 1)[0], "--limit", "2"],
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, COLUMNS="200")).stdout
    assert any("broadcast" in line and "│ 2990 │" in line for line in shown.splitlines()), shown


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_million_collectives_in_8_mb(tmp_path):
    """At least 2 million collectives (rank 0: 2M, rank 1: 1M) with COLLCHECK_MAX_MB=8: each
    rank keeps at most 8 MB plus one segment, and the divergence at the end is found."""
    steps = 500_000
    rc, _, _, run_dir = torchrun(LONG, 2, tmp_path, env={"COLLCHECK_MAX_MB": "8"}, timeout=1700,
                                 args=(str(steps + 10), str(steps)))
    assert rc != 0
    for rank in (0, 1):
        _, segs, total = kept_bytes(run_dir, rank)
        assert total <= 8 * 1024 * 1024 + max(os.path.getsize(s) for s in segs), total
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert code == 1 and first["kind"] == "op_mismatch" and first["group"] == "0" and first["position"] == steps
    sites = {e["rank"]: e["site"] for e in first["events"].values() if e}
    assert sites[1]["line"] == marker_lines(LONG)["diverge"]
