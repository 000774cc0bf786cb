"""Hang analysis (collcheck/analysis/hang.py) on runs written call by call: each rank's final
state, the wait-for graph (a rank blocked in a collective waits on every member that has not
issued it; in a recv, on its source), root causes, cross-group deadlocks, and how a job that
aborted is told from one that hung."""

from __future__ import annotations

import pytest

from collcheck.analysis import hang
from collcheck.analysis.diff import analyse
from support.runs import Call, write

AR = Call("allreduce_", size=4, line=10)
STUCK = Call("allreduce_", size=4, line=10, done=False)


def test_ranks_waiting_on_one_that_left_make_it_the_root_cause(tmp_path):
    """Ranks 0, 1, 3 wait in the world's #3; rank 2 exited cleanly after #2."""
    ranks = {r: [AR] * 3 + [STUCK] for r in (0, 1, 3)}
    ranks[2] = [AR] * 3
    run = write(str(tmp_path), {"0": (0, 1, 2, 3)}, ranks, finished=(2,))
    report = analyse(run)
    h = report.hang
    assert {r: s.state for r, s in h.states.items()} == {0: "killed-in-collective", 1: "killed-in-collective",
                                                          2: "finished", 3: "killed-in-collective"}
    assert sorted(h.graph.edges) == [(0, 2), (1, 2), (3, 2)] and h.root_causes == [2] and h.cycles == []
    assert [e.position for e in h.states[0].blocked] == [3]
    (f,) = [f for f in report.findings if f.kind == "hang"]
    assert (f.group, f.position, f.ranks) == ("0", 3, [2])
    assert f.details["waiting"] == [0, 1, 3] and f.details["root_causes"] == [2]
    assert report.verdict == "hang"


def test_opposite_orders_on_two_groups_are_a_deadlock_blaming_both(tmp_path):
    """Rank 0 enters group 1's all-reduce, then would do group 2's; rank 1 the other way round:
    each waits on the other, a cycle through two groups."""
    groups = {"0": (0, 1), "1": (0, 1), "2": (0, 1)}
    ranks = {0: [AR, Call(group="1", done=False)], 1: [AR, Call(group="2", done=False)]}
    report = analyse(write(str(tmp_path), groups, ranks, finished=()))
    h = report.hang
    assert sorted(h.graph.edges) == [(0, 1), (1, 0)] and h.root_causes == []
    assert sorted(map(sorted, h.cycles)) == [[0, 1]]
    (f,) = [f for f in report.findings if f.kind == "deadlock"]
    assert f.ranks == [0, 1] and sorted(f.details["groups"]) == ["1", "2"]
    assert report.verdict == "deadlock"


def test_a_ring_across_three_groups_is_one_cycle(tmp_path):
    groups = {"0": (0, 1, 2), "a": (0, 1), "b": (1, 2), "c": (0, 2)}
    ranks = {0: [AR, Call(group="a", done=False)], 1: [AR, Call(group="b", done=False)],
             2: [AR, Call(group="c", done=False)]}
    h = analyse(write(str(tmp_path), groups, ranks, finished=())).hang
    assert sorted(h.graph.edges) == [(0, 1), (1, 2), (2, 0)]
    assert len(h.cycles) == 1 and sorted(h.cycles[0]) == [0, 1, 2]


def test_a_recv_waits_on_its_source_only(tmp_path):
    """Rank 2 waits in a recv from rank 0 (group rank 0 of the world), which finished without
    sending; rank 1, done, is no one's concern."""
    ranks = {0: [AR], 1: [AR], 2: [AR, Call("recv_", size=8, line=30, peer=0, done=False, reduce_op=None)]}
    h = analyse(write(str(tmp_path), {"0": (0, 1, 2)}, ranks, finished=(0, 1))).hang
    assert sorted(h.graph.edges) == [(2, 0)] and h.root_causes == [0]


def test_collectives_enqueued_behind_a_blocked_one_wait_for_it():
    """split_queued: per group (per peer and op for P2P), the first pending event is where the rank
    waits; the later ones are queued behind it; one that failed is never queued."""

    class Sig:
        def __init__(self, op):
            self.op = op

    class Ev:
        def __init__(self, name, group, op="allreduce_", peer=None, error=None):
            self.name, self.group, self.sig, self.peer_global, self.error = name, group, Sig(op), peer, error

    evs = [Ev("a1", "1"), Ev("b1", "2"), Ev("a2", "1"), Ev("s1", "1", "send", 3), Ev("s2", "1", "send", 3),
           Ev("r1", "1", "recv_", 3), Ev("a3", "1", error="timed out")]
    blocked, queued = hang.split_queued(evs)
    assert [e.name for e in blocked] == ["a1", "b1", "s1", "r1", "a3"]
    assert [e.name for e in queued] == ["a2", "s2"]


@pytest.mark.parametrize("errors, state", [
    (["[../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 6000ms for recv operation"], "timed-out"),
    (["Connection closed by peer [127.0.0.1]:4242"], "peer-lost"),
    (["Connection reset by peer"], "peer-lost"),
    (["invalid root rank"], "collective-failed"),
])
def test_how_a_collective_failed_names_the_state(errors, state):
    assert hang._error_state(errors) == state


def test_a_job_where_ranks_failed_at_once_aborted_rather_than_hung(tmp_path):
    """Rank 1 left; rank 0's collective failed at once with 'Connection closed by peer' (gloo):
    nobody waited for a timeout, so the job aborted, and the report says how."""
    lost = "Connection closed by peer [127.0.0.1]:5555"
    ranks = {0: [AR, Call(error=lost)], 1: [AR]}
    report = analyse(write(str(tmp_path), {"0": (0, 1)}, ranks, finished=(1,), raised={0: lost}))
    h = report.hang
    assert h.states[0].state == "peer-lost" and h.states[1].state == "finished"
    text = hang.abort_text(h)
    assert text is not None and "rank 0 failed at once" in text
    assert report.verdict == "aborted"


def test_ranks_that_all_finished_have_no_hang(tmp_path):
    report = analyse(write(str(tmp_path), {"0": (0, 1)}, {0: [AR] * 3, 1: [AR] * 3}))
    assert not report.hang.inside and hang.hang_findings(report.run, report.hang) == []
    assert hang.abort_text(report.hang) is None


def test_a_rank_with_no_log_is_said_missing(tmp_path):
    run = write(str(tmp_path), {"0": (0, 1, 2)}, {0: [AR, STUCK], 1: [AR, STUCK]}, finished=())
    states = hang.final_states(run)
    assert states[2].state == "missing-log" and states[0].state == "killed-in-collective"


@pytest.mark.parametrize("extra_site", [10, 12])  # the next call at a site rank 1 ran before, or a new one
def test_a_rank_that_raised_its_own_exception_is_the_one_that_stopped(tmp_path, extra_site):
    """Two ranks, no majority: rank 1's program raised (an exception of its own, none of its
    collectives pending or failed) after collective #1; rank 0 went on to #2, which failed when
    rank 1 went away. Rank 1 stopped before #2: it is the culprit, whatever the site of #2, and
    the verdict says it raised with none of its collectives pending."""
    lost = "Connection closed by peer [127.0.0.1]:5555"
    ranks = {0: [AR, AR, Call(line=extra_site, error=lost)], 1: [AR, AR]}
    report = analyse(write(str(tmp_path), {"0": (0, 1)}, ranks, finished=(), raised={0: lost, 1: "bad batch"}))
    first = report.findings[0]
    assert (first.kind, first.ranks, first.position, first.details.get("stopped")) == ("missing", [1], 2, True)
    text = hang.abort_text(report.hang)
    assert "rank 1 raised an exception with none of its collectives pending" in text, text


def test_a_rank_that_raised_inside_a_collective_is_not_blamed_for_stopping(tmp_path):
    """Rank 1's exception came with its collective still pending (a consequence): the tie is read
    as before (rank 0's next call, from a site rank 1 never ran, is the extra one)."""
    ranks = {0: [AR, AR, Call(line=12)], 1: [AR, STUCK]}
    report = analyse(write(str(tmp_path), {"0": (0, 1)}, ranks, finished=(0,), raised={1: "timed out"}))
    assert all(not (f.kind == "missing" and f.ranks == [1] and f.details.get("stopped")) for f in report.findings)
