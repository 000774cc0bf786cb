"""The simulated NCCL backend (collcheck.simnccl) against seed 004's own outcomes: six DDP cases
run on two GPUs under NCCL, each with which ranks finished and which stayed stuck. Each case is
the scenario program (it names gloo) run unchanged with COLLCHECK_SIMNCCL=1, which makes its
groups simnccl ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import program, torchrun

from collcheck.model import load_run

SEED_OUTCOMES = {  # case: (ranks that finish, ranks stuck until the watchdog aborts them)
    1: ({0, 1}, set()),
    2: ({0, 1}, set()),  # rank 1's 6th bucket all-reduce is enqueued, never completes; its CPU runs on
    3: ({0}, {1}),
    4: ({1}, {0}),
    5: ({0}, {1}),
    6: ({0, 1}, set()),
}
SIM = {"COLLCHECK_SIMNCCL": "1"}
SCENARIOS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scenarios")


def outcome(case: int, tmp_path, env=None):
    rc, out, err, run_dir = torchrun(os.path.join(SCENARIOS, f"seed004_case{case}", "main.py"), 2, tmp_path,
                                     timeout=90, env=dict(SIM, **(env or {})))
    finished = {int(r) for r in re.findall(r"Rank (\d) has exhausted", out)}
    stuck = {int(r) for r in re.findall(r"\[rank (\d)\] simnccl watchdog caught collective operation timeout", err)}
    return finished, stuck, rc, run_dir


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", [1, 2, 3, 5, 6])
def test_seed004_cases_end_as_they_did_under_nccl(case, tmp_path):
    finished, stuck, rc, run_dir = outcome(case, tmp_path)
    assert (finished, stuck) == SEED_OUTCOMES[case], (finished, stuck)
    assert (rc == 0) == (not stuck)
    states = {r: log.state for r, log in load_run(run_dir).ranks.items()}
    assert all(states[r] == "finished" for r in finished), states


@pytest.mark.timeout(150)
def test_seed004_case4_depends_on_what_a_barrier_contributes(tmp_path):
    """Case 4 pairs rank 1's barrier with rank 0's join() all-reduce of its not-joined count. The
    seed ran torch 1.9.1, whose ProcessGroupNCCL::barrier all-reduced `at::empty({1})`: whatever
    the memory held, so the count read non-zero, rank 0 stayed in join()'s loop and was stuck while
    rank 1 finished. torch 2.13's barrier all-reduces `at::zeros({1})` ("we use zeros() instead of
    empty() to prevent barrier from triggering alarm when NaN checker is enabled"): the count reads
    0, rank 0 concludes every rank joined and finishes, rank 1 is left in join() and is stuck. The
    simulator reproduces both, with the barrier's value as each torch had it."""
    finished, stuck, _, _ = outcome(4, tmp_path / "old", env={"SIMNCCL_BARRIER_VALUE": "1"})
    assert (finished, stuck) == SEED_OUTCOMES[4], (finished, stuck)
    finished, stuck, _, _ = outcome(4, tmp_path / "new")
    assert (finished, stuck) == ({0}, {1}), (finished, stuck)


@pytest.mark.timeout(120)
def test_nccl_pairs_by_position_and_checks_nothing(tmp_path):
    """A barrier meets an all-reduce, an int64 meets a float64 of the same size: under NCCL both
    complete, the values are whatever the bytes added up to; the job finishes."""
    rc, out, err, run_dir = torchrun(program("simnccl_semantics.py"), 2, tmp_path, timeout=90, env=SIM,
                                     args=("silent",))
    assert rc == 0, err[-3000:]
    # rank 1's 5.0 plus rank 0's barrier zeros; rank 0's int64 3 plus rank 1's float64 bytes
    assert "rank 1 result 5.0" in out, out
    run = load_run(run_dir)
    assert all(log.state == "finished" and not log.pending for log in run.ranks.values())


@pytest.mark.timeout(120)
def test_a_rank_runs_ahead_until_a_sync_point(tmp_path):
    """Rank 0's 60 all-reduces return at once (rank 1 never joins): the CPU goes on to the line
    that reads a result, waits there, and the watchdog takes the process down at the timeout;
    the log holds all 60, issued and not completed."""
    rc, out, err, run_dir = torchrun(program("simnccl_semantics.py"), 2, tmp_path, timeout=90, env=SIM,
                                     args=("ahead",))
    assert rc != 0 and "issued 60" in out, out + err[-2000:]
    assert "[rank 0] simnccl watchdog caught collective operation timeout" in err, err[-2000:]
    log = load_run(run_dir).ranks[0]
    ahead = [i for i in range(len(log)) if log.event(i).sig.op == "allreduce_"]
    assert len(ahead) == 60
    assert [i for i in ahead if i in log.pending or log.event(i).error] == ahead, log.pending


@pytest.mark.timeout(120)
def test_demo_runs_a_scenario_on_the_simulated_backend():
    proc = subprocess.run([sys.executable, "-m", "collcheck", "demo", "seed004_case3", "--backend", "simnccl"],
                          capture_output=True, text=True, timeout=110, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "torchrun on simnccl" in proc.stdout and "collcheck diff:" in proc.stdout, proc.stdout[-2000:]
