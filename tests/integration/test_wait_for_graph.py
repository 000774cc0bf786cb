"""The wait-for graph of real hangs with point-to-point messages (3-rank gloo jobs)."""

from __future__ import annotations

import pytest

from collcheck.analysis.diff import analyse
from collcheck.model import load_run
from support.jobs import marker_lines, program


@pytest.mark.slow
@pytest.mark.recordings("p2p_then_missing")
def test_wait_for_graph_counts_collective_slots_without_p2p(corpus):
    """Rank 0 waits in the group's first all_reduce on rank 2, which only sent a message and left:
    point-to-point ops are not slots of the group's collectives (rank 2's send must not count)."""
    script = program("p2p_then_missing.py")
    rec = corpus("p2p_then_missing")
    assert rec.rc not in (0, None), rec.tail()
    run_dir = rec.run_dir
    report = analyse(load_run(run_dir))
    assert report.hang.graph.has_edge(0, 2) and report.hang.graph.has_edge(1, 2), list(report.hang.graph.edges)
    assert report.hang.root_causes == [2]
    blocked = report.hang.states[1].blocked
    assert [(e.sig.op, e.position, e.site[1]) for e in blocked] == [("allreduce_", 0, marker_lines(script)["all_reduce"])]
    assert (report.first.kind, report.first.ranks) == ("missing", [2])


@pytest.mark.recordings("batch_ring")
def test_batch_p2p_waits_follow_the_unmatched_messages(corpus):
    """gloo's batch_isend_irecv work has no future: the timeout each waiting rank raised is tied to
    its batch, and a rank waits on a peer only for a message the peer never posted. Rank 0, which
    moved on to the all_reduce, did not issue an 'extra' collective: the others are stuck elsewhere."""
    script = program("batch_ring.py")
    rec = corpus("batch_ring")
    assert rec.rc not in (0, None), rec.tail()
    run_dir = rec.run_dir
    report = analyse(load_run(run_dir))
    kinds = [f.kind for f in report.findings]
    assert kinds[:2] == ["unmatched_p2p", "unmatched_p2p"] and "extra" not in kinds, kinds
    edges = set(report.hang.graph.edges)
    # rank 1's recv from 0 was posted by rank 0 (no arc); its send to 2 never met a recv
    assert (1, 2) in edges and (1, 0) not in edges and (2, 0) in edges, edges
    line = marker_lines(script)["batch"]
    assert {e.site[1] for e in report.hang.states[1].blocked} == {line}
    assert report.verdict == "deadlock"
