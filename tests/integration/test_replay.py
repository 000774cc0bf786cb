"""`collcheck replay`: recorded scenarios replayed on local gloo processes, scale-down,
minimized repro scripts and what-ifs.

Each replay starts one Python process per rank (about 1-2 s on a 2-core machine, plus the
replay timeout when it hangs). Every scenario is replayed; recordings are shared with
test_scenarios.py (the shared recordings: support/corpus.py).
"""

from __future__ import annotations

import json
import os
import random
import shutil

import pytest

from collcheck import synth
from collcheck.analysis.diff import analyse
from collcheck.model import load_run
from collcheck.cli import main as cli_main
from collcheck.replay.minimize import Minimizer, emit_script
from collcheck.replay.plan import build_plan, involved_ranks
from collcheck.replay.whatif import Edit
from collcheck.replay.runner import finding_key, run_plan, site_key
from support.corpus import params, scenario_names
from support.jobs import SCENARIOS, job, launch
from support.race_helpers import swap_cut_by_abort


def replay_main(argv: list[str]) -> int:
    """`collcheck replay ARGV...`, in this process."""
    return cli_main(["replay", *argv])

TIMEOUT = 2.0  # replay process-group timeout: hangs end quickly
NAMES = [n for n in scenario_names() if (SCENARIOS / n / "expected.json").exists()]


def expected(name):
    with open(SCENARIOS / name / "expected.json") as f:
        return json.load(f)


@pytest.fixture
def recorded(corpus):
    """name -> run directory of the scenario's shared recording."""
    def get(name):
        rec = corpus(f"scenario:{name}")
        assert rec.rc is not None, rec.tail()
        return rec.run_dir

    return get


def check_replay(name, run_dir, tmp_path):
    run = load_run(run_dir)
    original = analyse(run)
    plan = build_plan(run, timeout_s=TIMEOUT)
    out = run_plan(plan, str(tmp_path / "replay"))
    want = expected(name)
    if want["verdict"] == "clean":
        assert original.first is None
        assert out.status == "completed" and out.first_key() is None, (out.status, out.first_key(), out.outputs)
        return out
    orig = finding_key(original.first)
    crashed = [r for r, s in out.report.hang.states.items() if s.state == "crashed"] if out.report else []
    if out.first_key() != orig and swap_cut_by_abort(orig, out.first_key() or ("",), crashed):
        return out  # gloo aborted the culprit before it issued the swapped call (race_helpers.py)
    assert out.first_key() == orig, (out.status, out.outputs)
    # the replayed collectives play the recorded purposes (DDP buckets numbered per backward pass)
    labels = {plan.rank_map[r]: e.label for r, e in out.report.first.events.items() if e is not None}
    assert labels == {r: e.label for r, e in original.first.events.items() if e is not None and r in labels}
    ew = want["findings"][0]
    exp = (ew["kind"], ew["group"], ew["position"], tuple(ew["ranks"]))
    if orig == exp:  # the recording matched scenarios/<name>/expected.json: so must the replay
        assert out.first_key() == exp
    return out


# The default run replays a hang a rank left (missing_barrier), a valid program with P2P stages,
# a mismatch (gloo's abort on a size mismatch: shape_mismatch, in the --emit-script test) and a fix
# (seed004_case4's what-if); the rest of the scenarios, a silent mismatch (dtype_mismatch) among
# them, replay with -m slow.
DEFAULT_REPLAYS = frozenset(("missing_barrier",))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", params(NAMES, lambda n: f"scenario:{n}", default=DEFAULT_REPLAYS))
def test_scenario_replays(name, tmp_path, recorded):
    check_replay(name, recorded(name), tmp_path)


# -- what-if -----------------------------------------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.recordings("scenario:seed004_case4")
def test_what_if_removing_the_culprit_completes_seed004_case4(recorded, capsys):
    run_dir = recorded("seed004_case4")
    f = analyse(load_run(run_dir)).first
    (culprit,) = f.ranks
    i = f.events[culprit].index
    # the culprit's barrier removed: both ranks were cut by the hang, so after their
    # recordings end they follow their peers (the culprit joins the peer's join() all-reduce)
    code = replay_main([run_dir, "--timeout", str(TIMEOUT), "--drop", f"{culprit}:{i}"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "replay COMPLETED" in text and "fixes it" in text and f"rank {culprit} +1" in text


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.recordings("scenario:seed004_case4")
def test_what_if_needs_the_right_edit_and_the_peers_to_follow(tmp_path, recorded, capsys):
    run_dir = recorded("seed004_case4")
    run = load_run(run_dir)
    f = analyse(run).first
    (culprit,) = f.ranks
    other = next(r for r in f.events if r != culprit)
    i, j = f.events[culprit].index, f.events[other].index
    # the same with the follow-up call given explicitly: no following needed
    plan = build_plan(run, timeout_s=TIMEOUT, edits=[Edit("drop", culprit, i), Edit("insert", culprit, -1, other, j)])
    assert not any("follow" in n for n in plan.notes)
    out = run_plan(plan, str(tmp_path / "drop-insert"))
    assert out.status == "completed" and out.first_key() is None, out.outputs
    # without following, the peer's join() all-reduce has no partner: still a hang
    plan = build_plan(run, timeout_s=TIMEOUT, edits=[Edit("drop", culprit, i)], follow=False)
    out = run_plan(plan, str(tmp_path / "no-follow"))
    assert out.status != "completed"
    # removing the wrong collective (the one before) does not fix it
    code = replay_main([run_dir, "--timeout", str(TIMEOUT), "--drop", f"{culprit}:{i - 1}"])
    text = capsys.readouterr().out
    assert code == 1 and "does not make the replay complete" in text, text


@pytest.mark.recordings("scenario:seed004_case4")
def test_bad_edit_is_an_input_error(recorded, capsys):
    run_dir = recorded("seed004_case4")
    assert replay_main([run_dir, "--drop", "1:9999"]) == 2
    assert replay_main([run_dir, "--drop", "x"]) == 2
    assert "expected RANK:INDEX" in capsys.readouterr().err


# -- scale-down ----------------------------------------------------------------------------------


def synthetic_32(tmp_path, pair=(5, 17)):
    """32 ranks; a shape mismatch inside a 2-member subgroup, so the divergence involves 2 ranks."""
    rng = random.Random(10)
    prog = synth.generate_program(rng, 32, 60, groups=[list(pair), [0, 9, 20, 31]], coalesced=False)
    faults = [f for f in synth.fault_candidates(prog, "shape_mismatch") if prog.ops[f.index].group == "1"]
    fault = faults[len(faults) // 2]
    d = tmp_path / "synth32"
    d.mkdir()
    synth.write_run(str(d), prog, [fault])
    return str(d), fault.expect(prog), fault.rank


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_32_rank_recording_replays_on_few_processes(tmp_path, capsys):
    run_dir, exp, faulty = synthetic_32(tmp_path)
    run = load_run(run_dir)
    first = analyse(run).first
    if first.details.get("blame"):  # two members, no majority: the alignment names the rank that changed it
        exp = exp._replace(ranks=[faulty])
    assert finding_key(first) == (exp.kind, exp.group, exp.position, tuple(exp.ranks))
    ranks, _ = involved_ranks(run, first)
    assert len(ranks) <= 4
    code = replay_main([run_dir, "--timeout", str(TIMEOUT), "--format", "json"])  # world 32: --ranks auto
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    assert doc["world"] <= 4 and doc["matches"], doc
    assert doc["replayed"]["kind"] == "shape_mismatch" and doc["replayed"]["ranks"] == exp.ranks


@pytest.mark.slow  # replays the 4-rank cross-group deadlock to its end, as its own replay test (slow) does
@pytest.mark.timeout(60)
@pytest.mark.recordings("scenario:cross_group_deadlock")
def test_scale_down_says_when_it_cannot(recorded, capsys):
    run_dir = recorded("cross_group_deadlock")
    code = replay_main([run_dir, "--ranks", "auto", "--timeout", str(TIMEOUT)])
    text = capsys.readouterr().out
    assert "cannot scale down" in text and "all 4 ranks" in text
    assert code == 1


# -- minimization and emitted scripts -------------------------------------------------------------


def synthetic_long(tmp_path):
    """2 ranks, 300 collectives each (600 recorded), a shape mismatch near the end."""
    rng = random.Random(3)
    prog = synth.generate_program(rng, 2, 300, groups=0, p2p=False, coalesced=False)
    faults = [f for f in synth.fault_candidates(prog, "shape_mismatch") if f.index > 250]
    d = tmp_path / "long"
    d.mkdir()
    synth.write_run(str(d), prog, [faults[0]])
    return str(d)


def torchrun_recorded(script, nproc, log_dir, timeout=120):
    """The emitted script run as its header says: torchrun with COLLCHECK=1, from its folder."""
    rec = launch(job(script, nproc, timeout=timeout), str(log_dir), cwd=str(log_dir))
    return rec, rec.run_dir


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_minimized_script_reproduces_with_torchrun(tmp_path):
    run_dir = synthetic_long(tmp_path)
    run = load_run(run_dir)
    first = analyse(run).first
    plan = build_plan(run, timeout_s=TIMEOUT)
    assert plan.n_ops() >= 500
    target = (first.kind, first.group, tuple(sorted(first.ranks)), site_key(first))
    m = Minimizer(plan, target, str(tmp_path / "min"), timeout_s=TIMEOUT, max_tests=8)
    (tmp_path / "min").mkdir()
    small = m.run(first.group, first.position)
    assert small.n_ops() <= 30 and m.tests <= 8
    script = str(tmp_path / "repro.py")
    emit_script(small, script, "test")
    with open(script) as f:
        text = f.read()
    assert "collcheck" not in text.split('"""', 2)[2]  # standalone: torch only
    proc, repro_run = torchrun_recorded(script, small.world, tmp_path)
    assert proc.rc not in (0, None), proc.tail()  # it fails as the recording did
    again = analyse(load_run(repro_run)).first
    assert (again.kind, again.group, tuple(again.ranks), site_key(again)) == target, proc.tail()


@pytest.mark.slow  # (~20 s: a torchrun of the emitted script; the default run replays in-process above)
@pytest.mark.timeout(240)
@pytest.mark.recordings("scenario:shape_mismatch")
def test_cli_emits_a_script_that_torchrun_runs_into_the_same_finding(tmp_path, recorded, capsys):
    """`replay --emit-script` on a short recording: a few trial replays, then a standalone program
    that torchrun, recorded, runs into the recording's first finding. The run's folder is named to
    end the script's docstring and run code (its name is data in the script, never code)."""
    run_dir = str(tmp_path / 'run"""\nimport os; os.mkdir("pwned")\n"""')
    shutil.copytree(recorded("shape_mismatch"), run_dir)
    script = str(tmp_path / "repro.py")
    code = replay_main([run_dir, "--timeout", str(TIMEOUT), "--emit-script", script, "--max-tests", "3"])
    text = capsys.readouterr().out
    assert code == 1 and os.path.exists(script), text
    assert "matches the recording: yes" in text, text
    proc, repro_run = torchrun_recorded(script, 2, tmp_path)
    assert proc.rc not in (0, None), proc.tail()
    assert not (tmp_path / "pwned").exists()
    f = analyse(load_run(repro_run)).first
    orig = analyse(load_run(run_dir)).first
    assert (f.kind, f.group, f.ranks, site_key(f)) == (orig.kind, orig.group, orig.ranks, site_key(orig))


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.recordings("scenario:train_then_eval_gather")
def test_cli_emits_minimized_script_for_long_scenario(tmp_path, recorded, capsys):
    """train_then_eval_gather: more than 500 recorded collectives, the mismatch last; the CLI
    minimizes them to a script that torchrun runs into the same first finding."""
    import re

    run_dir = recorded("train_then_eval_gather")
    script = str(tmp_path / "repro.py")
    code = replay_main([run_dir, "--timeout", str(TIMEOUT), "--emit-script", script, "--max-tests", "10"])
    text = capsys.readouterr().out
    assert code == 1 and os.path.exists(script), text
    assert "matches the recording: yes" in text
    kept, total = (int(x) for x in re.search(r"kept (\d+) of (\d+) collective", text).groups())
    assert total >= 500 and kept <= 30, text
    proc, repro_run = torchrun_recorded(script, 2, tmp_path)
    assert proc.rc not in (0, None), proc.tail()
    f = analyse(load_run(repro_run)).first
    orig = analyse(load_run(run_dir)).first
    assert (f.kind, f.group, f.ranks, site_key(f)) == (orig.kind, orig.group, orig.ranks, site_key(orig))
    assert len(load_run(repro_run).ranks[0]) <= 30


