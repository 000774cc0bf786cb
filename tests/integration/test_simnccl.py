"""The simulated NCCL backend (collcheck.simnccl) against seed 004's own outcomes: six DDP cases
run on two GPUs under NCCL, each with which ranks finished and which stayed stuck. Each case is
the scenario program (it names gloo) run unchanged with COLLCHECK_SIMNCCL=1, which makes its
groups simnccl ones."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from collcheck.model import load_run
from support.cli import diff_json, run_cli
from support.corpus import params, scenario_meta, scenario_names
from support.jobs import marker_lines, program

SEED_OUTCOMES = {  # case: (ranks that finish, ranks stuck until the watchdog aborts them)
    1: ({0, 1}, set()),
    2: ({0, 1}, set()),  # rank 1's 6th bucket all-reduce is enqueued, never completes; its CPU runs on
    3: ({0}, {1}),
    4: ({1}, {0}),
    5: ({0}, {1}),
    6: ({0, 1}, set()),
}
SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scenarios")


def expected_on_simnccl(name: str) -> list:
    """The scenario's first findings as (kind, group, position, ranks): its `simnccl` entry where
    NCCL's semantics make a difference (with the reason), else the same as on gloo."""
    with open(os.path.join(SCENARIOS, name, "expected.json")) as f:
        expected = json.load(f)
    findings = expected.get("simnccl", expected)["findings"]
    return [(f["kind"], f["group"], f["position"], f["ranks"]) for f in findings[:1]]


def first_findings(run_dir: str) -> list:
    _, report = diff_json(run_dir)
    return [(f["kind"], f["group"], f["position"], f["ranks"]) for f in report["findings"][:1]]


def outcome(corpus, name: str):
    rec = corpus(name)
    assert rec.rc is not None, rec.tail()
    finished = {int(r) for r in re.findall(r"Rank (\d) has exhausted", rec.stdout)}
    stuck = {int(r) for r in re.findall(r"\[rank (\d)\] simnccl: Watchdog caught collective operation timeout",
                                        rec.stderr)}
    return finished, stuck, rec.rc, rec.run_dir


# -m slow, as the two case 4 tests below: the default run runs case 2 (the demo, test below) and
# checks a barrier's zeros paired silently with an all-reduce (test_nccl_pairs_by_position_and_checks_nothing)
@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.recordings(f"scenario:seed004_case{c}@simnccl"))
                                  for c in (1, 2, 3, 5, 6)])
def test_seed004_cases_end_as_they_did_under_nccl(case, corpus):
    finished, stuck, rc, run_dir = outcome(corpus, f"scenario:seed004_case{case}@simnccl")
    assert (finished, stuck) == SEED_OUTCOMES[case], (finished, stuck)
    assert (rc == 0) == (not stuck)
    states = {r: log.state for r, log in load_run(run_dir).ranks.items()}
    assert all(states[r] == "finished" for r in finished), states
    # the diff names the pair the seed's explanation names: case 2 and 3 rank 1's 6th bucket
    # all-reduce that rank 0 never issued, case 5 rank 0's barrier paired with it (silently)
    assert first_findings(run_dir) == expected_on_simnccl(f"seed004_case{case}")


@pytest.mark.slow
@pytest.mark.recordings("scenario:seed004_case4@simnccl+torch19")
def test_seed004_case4_with_torch_1_9s_barrier_ends_as_the_seed_reports(corpus):
    """The seed's own outcome, with the barrier's value as torch 1.9.1 left it (uninitialised:
    here 1): rank 0's join() count reads non-zero, it stays in join() and is stuck, rank 1
    finishes (the 2.13 reading: the test below)."""
    finished, stuck, _, _ = outcome(corpus, "scenario:seed004_case4@simnccl+torch19")
    assert (finished, stuck) == SEED_OUTCOMES[4], (finished, stuck)


@pytest.mark.slow
@pytest.mark.recordings("scenario:seed004_case4@simnccl")
def test_seed004_case4_depends_on_what_a_barrier_contributes(corpus):
    """Case 4 pairs rank 1's barrier with rank 0's join() all-reduce of its not-joined count. The
    seed ran torch 1.9.1, whose ProcessGroupNCCL::barrier all-reduced `at::empty({1})`: whatever
    the memory held, so the count read non-zero, rank 0 stayed in join()'s loop and was stuck while
    rank 1 finished. torch 2.13's barrier all-reduces `at::zeros({1})` ("we use zeros() instead of
    empty() to prevent barrier from triggering alarm when NaN checker is enabled"): the count reads
    0, rank 0 concludes every rank joined and finishes, rank 1 is left in join() and is stuck. The
    simulator reproduces both, with the barrier's value as each torch had it (torch 1.9's: the
    test above, with -m slow)."""
    finished, stuck, _, run_dir = outcome(corpus, "scenario:seed004_case4@simnccl")
    assert (finished, stuck) == ({0}, {1}), (finished, stuck)
    # rank 1's barrier paired with join()'s not-joined count all-reduce, silently
    assert first_findings(run_dir) == expected_on_simnccl("seed004_case4")
    _, report = diff_json(run_dir)
    assert report["findings"][0]["details"].get("silent"), report["findings"][0]


@pytest.mark.recordings("simnccl_silent")
def test_nccl_pairs_by_position_and_checks_nothing(corpus):
    """A barrier meets an all-reduce, an int64 meets a float64 of the same size: under NCCL both
    complete, the values are whatever the bytes added up to; the job finishes."""
    rec = corpus("simnccl_silent")
    assert rec.rc == 0, rec.tail()
    out, run_dir = rec.stdout, rec.run_dir
    # rank 1's 5.0 plus rank 0's barrier zeros; rank 0's int64 3 plus rank 1's float64 bytes
    assert "rank 1 result 5.0" in out, out
    run = load_run(run_dir)
    assert all(log.state == "finished" and not log.pending for log in run.ranks.values())
    # the diff names both slots as NCCL ran them, each pair completed together: silent corruption
    code, report = diff_json(run_dir)
    assert code == 1 and report["verdict"] == "mismatch", report["verdict"]
    got = [(f["kind"], f["group"], f["position"], f["details"].get("silent")) for f in report["findings"]]
    assert got == [("op_mismatch", "0", 0, True), ("dtype_mismatch", "0", 1, True)], got
    first = report["findings"][0]
    assert "under NCCL these completed together, unchecked (silent corruption, no error)" in first["message"], \
        first["message"]
    assert "the barrier is a 1-element all-reduce of zeros" in first["message"], first["message"]


@pytest.mark.recordings("simnccl_ahead")
def test_a_rank_runs_ahead_until_a_sync_point(corpus):
    """Rank 0's 60 all-reduces return at once (rank 1 never joins): the CPU goes on to the line
    that reads a result, waits there, and the watchdog takes the process down at the timeout;
    the log holds all 60, issued and not completed."""
    rec = corpus("simnccl_ahead")
    out, err, run_dir = rec.stdout, rec.stderr, rec.run_dir
    assert rec.rc not in (0, None) and "issued 60" in out, rec.tail()
    assert "[rank 0] simnccl: Watchdog caught collective operation timeout" in err, err[-2000:]
    log = load_run(run_dir).ranks[0]
    ahead = [i for i in range(len(log)) if log.event(i).sig.op == "allreduce_"]
    assert len(ahead) == 60
    assert [i for i in ahead if i in log.pending or log.event(i).error] == ahead, log.pending
    # the diff: rank 0 is stuck at its first all-reduce (the stream's), 59 queued behind it, and its
    # CPU waited at the line that read a result; rank 1, which never came, is the root cause
    code, report = diff_json(run_dir)
    assert code == 1 and report["verdict"] == "hang", report["verdict"]
    marks = marker_lines(program("simnccl_semantics.py"))
    r0 = report["ranks"]["0"]
    assert r0["state"] == "timed-out" and [e["position"] for e in r0["blocked_in"]] == [0], r0
    assert r0["queued_behind"] == 59, r0
    assert "its stream waits in #0 of group 0 (all_reduce), 59 more enqueued behind it" in r0["detail"], r0["detail"]
    assert f"then waited at simnccl_semantics.py:{marks['sync']} in <module>() (Tensor.tolist())" in r0["detail"], \
        r0["detail"]
    hang = next(f for f in report["findings"] if f["kind"] == "hang")
    assert hang["ranks"] == [1] and hang["details"]["queued"] == {"0": 59}, hang
    assert f"rank 0's CPU thread waited at simnccl_semantics.py:{marks['sync']}" in hang["message"], hang["message"]


@pytest.mark.slow  # (15 s of the default run's 6 minutes: the demo's whole job and diff)
@pytest.mark.timeout(120)
def test_demo_runs_a_scenario_on_the_simulated_backend():
    """seed004_case2 on simnccl: rank 1's extra bucket all-reduce never completes, both ranks exit;
    the demo shows what live mode said at the end of the job, then the diff."""
    proc = subprocess.run([sys.executable, "-m", "collcheck", "demo", "seed004_case2", "--backend", "simnccl"],
                          capture_output=True, text=True, timeout=110, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "torchrun on simnccl" in proc.stdout and "collcheck diff:" in proc.stdout, proc.stdout[-2000:]
    # both ranks finished, as case 2 did under NCCL (SEED_OUTCOMES: no rank stuck)
    assert "torchrun exited with 0;" in proc.stdout, proc.stdout[-3000:]
    assert "while it ran, live mode said: collcheck live: missing collective in group 0 at #10, culprit rank 0" \
        in proc.stdout, proc.stdout[-3000:]


@pytest.mark.slow
@pytest.mark.recordings("simnccl_p2p")
def test_point_to_point_does_not_shift_the_groups_collectives(corpus):
    """Rank 0 sends rank 1 a 7 before all three all-reduce their value: the sends and receives run
    on their own per-pair streams, so the all-reduce still pairs slot by slot on every rank."""
    rec = corpus("simnccl_p2p")
    assert rec.rc == 0, rec.tail()
    out = rec.stdout
    assert sorted(re.findall(r"rank \d sum ([\d.]+)", out)) == ["9.0"] * 3, out  # 0 + 7 + 2


# every scenario with -m slow (each is a torchrun of 3-10 s); the default run checks a scenario's first
# finding on simnccl in test_live.py (dtype_mismatch, with live mode's report) and the seed cases above
QUICK = ()
MATRIX = [n for n in scenario_names() if os.path.exists(os.path.join(SCENARIOS, n, "expected.json"))
          and "simnccl" in scenario_meta(n).get("backends", ())
          and not n.startswith("seed004_case")]  # (the seed cases: above)


@pytest.mark.parametrize("name", params(MATRIX, lambda n: f"scenario:{n}@simnccl", default=QUICK))
def test_every_scenario_on_simnccl_gives_its_first_finding(name, corpus):
    """Each scenario, unchanged, on the simulated NCCL backend: the same first finding (kind,
    group, position, culprits) as on gloo, or the one its expected.json lists for simnccl with why
    NCCL's semantics make the difference; a valid scenario stays clean."""
    rec = corpus(f"scenario:{name}@simnccl")
    assert rec.rc is not None, rec.tail()
    assert first_findings(rec.run_dir) == expected_on_simnccl(name), rec.tail()
    if scenario_meta(name)["valid"]:  # live mode (on by default) reported nothing either
        assert not os.path.exists(os.path.join(rec.run_dir, "live-report.json")), rec.tail()


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.recordings("scenario:seed004_case5@simnccl")
def test_replay_on_simnccl_reproduces_what_nccl_did(corpus):
    """Seed 004 case 5 recorded on the simulated backend: rank 0's barrier ran as one collective
    with rank 1's extra bucket all-reduce. `replay --backend simnccl` re-issues the recorded calls
    with NCCL's semantics and gets that first finding again."""
    rec = corpus("scenario:seed004_case5@simnccl")
    assert rec.rc is not None, rec.tail()
    res = run_cli("replay", rec.run_dir, "--backend", "simnccl", "--timeout", "4", "--format", "json")
    doc = json.loads(res.out)
    assert doc["recorded"] == {"kind": "op_mismatch", "group": "0", "position": 10, "ranks": [0]}, doc
    assert doc["matches"] is True and doc["replayed"] == doc["recorded"], doc


def test_every_scenario_declares_the_backends_it_runs_on():
    """scenario.json's `backends`: the demo refuses another, the matrix above runs the simnccl ones
    (all of them today: a scenario that needs gloo's semantics would say so)."""
    for name in scenario_names():
        backends = scenario_meta(name).get("backends")
        assert backends and set(backends) <= {"gloo", "simnccl"} and "gloo" in backends, (name, backends)
    assert len(MATRIX) + 6 == len([n for n in scenario_names()
                                   if os.path.exists(os.path.join(SCENARIOS, n, "expected.json"))])


@pytest.mark.parametrize("world", [pytest.param(2, marks=[pytest.mark.slow, pytest.mark.recordings("simnccl_ops_2")]),
                                   pytest.param(3, marks=pytest.mark.recordings("simnccl_ops_3"))])
def test_every_collective_computes_what_nccl_computes(world, corpus):
    """The backend used directly (no recorder): every collective and P2P op, a subgroup and an
    object collective, each result checked against the arithmetic NCCL does."""
    rec = corpus(f"simnccl_ops_{world}")
    assert rec.rc == 0, rec.tail()
    assert rec.stdout.count("ok ") == world, rec.stdout
