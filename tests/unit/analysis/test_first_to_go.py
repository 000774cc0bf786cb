"""Which rank went first when a job died is taken from the evidence (analysis/ending.py), never
assumed: a rank killed without SIGTERM stacks (SIGKILL) while another has them went first, the
other was stopped by the launcher after it; with several, the earliest last sign of life; a rank
that failed because a peer went away names who went before it only when that peer's last sign of
life came first. Each case is written both ways round, so a wording fixed to one rank fails one."""

from __future__ import annotations

import pytest
from support.runs import Call, write

from collcheck.analysis.diff import analyse
from collcheck.analysis.ending import kill_order

PEER_LOST = "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:40121"


def _killed_in_the_same_collective(tmp_path, first: int, sigterm: int, world: int = 2, clock=None):
    """Every rank issued #0 and #1 and never completed #1; none exited. `first` has the earliest
    clock (its last record first), `sigterm` the SIGTERM stacks."""
    calls = [Call(line=10), Call(line=11, done=False)]
    clock = clock if clock is not None else {r: (0 if r == first else 500) for r in range(world)}
    return write(str(tmp_path), {"0": tuple(range(world))}, {r: calls for r in range(world)}, finished=(),
                 clock=clock, sigterm=(sigterm,))


@pytest.mark.parametrize("first, stopped", [(1, 0), (0, 1)])
def test_the_rank_without_sigterm_stacks_went_first(tmp_path, first, stopped):
    run = _killed_in_the_same_collective(tmp_path, first, stopped)
    assert {r: log.state for r, log in run.ranks.items()} == {0: "killed-in-collective", 1: "killed-in-collective"}
    report = analyse(run)
    order = report.hang.order
    assert (order.first, order.launcher) == ([first], [stopped])
    states = report.hang.states
    assert states[first].detail == "went first: killed without SIGTERM stacks (SIGKILL: the out-of-memory killer, a scheduler)"
    assert states[stopped].detail == f"stopped by the launcher (SIGTERM) after rank {first} went"
    hang = next(f for f in report.findings if f.kind == "hang")
    assert hang.ranks == [first] and report.hang.root_causes == [first]  # it is what the others waited in vain for
    assert f"on rank {first} (killed-in-collective)" in hang.message


@pytest.mark.parametrize("first, stopped", [(1, 0), (0, 1)])
def test_a_rank_that_lost_its_peer_names_the_one_that_went_first(tmp_path, first, stopped):
    """One rank SIGKILLed inside the collective (no stacks, no trailer), its peer failed at once
    ('Connection closed by peer'): the job aborted because the killed rank went first, not because
    the launcher stopped it."""
    calls = {first: [Call(line=10), Call(line=11, done=False)],
             stopped: [Call(line=10), Call(line=11, done=False, error=PEER_LOST)]}
    run = write(str(tmp_path), {"0": (0, 1)}, calls, finished=(), raised={stopped: PEER_LOST})
    report = analyse(run)
    assert report.hang.states[stopped].state == "peer-lost" and report.hang.order.first == [first]
    assert report.verdict == "aborted"
    assert report.aborted == (f"rank {first} was killed first inside the collective, without SIGTERM stacks (SIGKILL: "
                              "the out-of-memory killer, a scheduler); rank "
                              f"{stopped} failed at once with 'Connection closed/reset by peer' (a peer went away)")
    assert "launcher" not in report.aborted


def test_a_rank_alive_after_its_peer_failed_did_not_go_first(tmp_path):
    """Its last record came after the peer's failure: it was killed later (nothing says it went
    first), and the words say no more than the evidence."""
    calls = {1: [Call(line=10), Call(line=11, done=False)],
             0: [Call(line=10), Call(line=11, done=False, error=PEER_LOST)]}
    run = write(str(tmp_path), {"0": (0, 1)}, calls, finished=(), raised={0: PEER_LOST}, clock={1: 10_000})
    report = analyse(run)
    assert report.hang.order.first == [] and report.verdict == "aborted"
    assert "rank 1 was killed while it waited (no SIGTERM stacks say by whom" in report.aborted
    assert "first" not in report.aborted


@pytest.mark.parametrize("early", [1, 2])
def test_of_several_killed_without_stacks_the_earliest_went_first(tmp_path, early):
    late = 3 - early
    run = _killed_in_the_same_collective(tmp_path, early, 0, world=3, clock={0: 900, early: 0, late: 400})
    order = kill_order(run, {r: log.state for r, log in run.ranks.items()})
    assert (order.first, order.launcher) == ([early], [0])


def test_without_evidence_nobody_is_named_first(tmp_path):
    """No rank has SIGTERM stacks and none failed because of a peer: a whole job killed from
    outside (a scheduler) leaves nothing to order the ranks by."""
    calls = [Call(line=10), Call(line=11, done=False)]
    run = write(str(tmp_path), {"0": (0, 1)}, {0: calls, 1: calls}, finished=(), clock={1: 500})
    report = analyse(run)
    assert (report.hang.order.first, report.hang.order.launcher) == ([], [])
    assert all("first" not in s.detail and "launcher" not in s.detail for s in report.hang.states.values())
