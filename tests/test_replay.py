"""`collcheck replay`: recorded scenarios replayed on local gloo processes, scale-down,
minimized repro scripts and what-ifs.

Each replay starts one Python process per rank (about 1-2 s on a 2-core machine, plus the
replay timeout when it hangs). Every scenario is replayed; recordings are shared with
test_scenarios.py through the `scenario_run` fixture (conftest.py).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from collcheck import synth
from collcheck.analysis.diff import analyse
from collcheck.demo import SCENARIOS_DIR
from collcheck.demo import free_port, scenario_names
from collcheck.model import load_run
from collcheck.replay import runtime
from collcheck.replay.cli import main as replay_main
from collcheck.replay.minimize import Minimizer, emit_script
from collcheck.replay.plan import build_plan, involved_ranks, shrink_shapes
from collcheck.replay.whatif import Edit
from collcheck.replay.runner import finding_key, run_plan, site_key

sys.path.insert(0, os.path.dirname(__file__))
from race_helpers import swap_cut_by_abort  # noqa: E402

TIMEOUT = 2.0  # replay process-group timeout: hangs end quickly
NAMES = [n for n in scenario_names() if os.path.exists(os.path.join(SCENARIOS_DIR, n, "expected.json"))]


def expected(name):
    with open(os.path.join(SCENARIOS_DIR, name, "expected.json")) as f:
        return json.load(f)


@pytest.fixture
def recorded(scenario_run):
    """name -> run directory of the scenario's recording (made once per session)."""
    def get(name):
        rc, run_dir, output = scenario_run(name)
        assert rc != -1, output
        return run_dir

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


# hanging replays whose mechanics others of the default run already cover (a barrier or op mismatch
# that waits out the replay's timeout: seed004_case5; P2P: unmatched_p2p), and the 4-rank
# cross-group deadlock (a hang waited out like seed004_case5's, on 4 processes): with -m slow
SLOW_REPLAYS = frozenset(("rank0_only_barrier", "op_mismatch", "root_mismatch", "p2p_tag_mismatch", "seed004_case4",
                          "group_mismatch", "cross_group_deadlock",
                          # valid programs and second cases of a kind (the default run keeps one valid
                          # program per pattern: DDP join, P2P, subgroups; and one case per kind)
                          "gather_scatter_root", "many_small_broadcasts", "per_param_allreduce", "seed004_case1",
                          "seed004_case6", "seed004_case2", "train_then_eval_gather", "pairwise_groups",
                          # a hang waited out, as unmatched_p2p's is
                          "seed004_case5"))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_REPLAYS else n for n in NAMES])
def test_scenario_replays(name, tmp_path, recorded):
    check_replay(name, recorded(name), tmp_path)


# -- what-if -----------------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_what_if_removing_the_culprit_completes_seed004_case4(tmp_path, recorded, capsys):
    run_dir = recorded("seed004_case4")
    run = load_run(run_dir)
    f = analyse(run).first
    (culprit,) = f.ranks
    other = next(r for r in f.events if r != culprit)
    i, j = f.events[culprit].index, f.events[other].index
    # the culprit's barrier removed: both ranks were cut by the hang, so after their
    # recordings end they follow their peers (the culprit joins the peer's join() all-reduce)
    code = replay_main([run_dir, "--timeout", str(TIMEOUT), "--drop", f"{culprit}:{i}"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "replay COMPLETED" in text and "fixes it" in text and f"rank {culprit} +1" in text
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
    return str(d), fault.expect(prog)


@pytest.mark.timeout(120)
def test_32_rank_recording_replays_on_few_processes(tmp_path, capsys):
    run_dir, exp = synthetic_32(tmp_path)
    run = load_run(run_dir)
    first = analyse(run).first
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
    run_id = f"repro-{os.getpid()}-{free_port()}"
    env = dict(os.environ, COLLCHECK="1", COLLCHECK_DIR=str(log_dir), COLLCHECK_RUN_ID=run_id, OMP_NUM_THREADS="1")
    env.pop("TORCHELASTIC_RUN_ID", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-addr",
           "127.0.0.1", "--master-port", str(free_port()), script]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=str(log_dir))
    return proc, os.path.join(str(log_dir), run_id)


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
    assert proc.returncode != 0  # it fails as the recording did
    again = analyse(load_run(repro_run)).first
    assert (again.kind, again.group, tuple(again.ranks), site_key(again)) == target, proc.stderr[-2000:]


@pytest.mark.timeout(240)
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
    assert proc.returncode != 0
    f = analyse(load_run(repro_run)).first
    orig = analyse(load_run(run_dir)).first
    assert (f.kind, f.group, f.ranks, site_key(f)) == (orig.kind, orig.group, orig.ranks, site_key(orig))
    assert len(load_run(repro_run).ranks[0]) <= 30


# -- pieces ------------------------------------------------------------------------------------------


def test_shrink_keeps_size_relations():
    from collcheck.replay.plan import Plan

    shapes = [[1000, 10], [10, 1000], [10000], [5000, 2], [3], [100, 100]]
    acts = [[{"k": "op", "i": i, "op": "allreduce_", "g": "0", "t": [["float32", s]]} for i, s in enumerate(shapes)]]
    plan = Plan(1, acts, [0])
    shrink_shapes(plan, 64)
    new = [a["t"][0][1] for a in plan.ranks[0]]
    numel = [__import__("math").prod(s) for s in new]
    old_numel = [__import__("math").prod(s) for s in shapes]
    assert all(n <= 128 for n in numel)
    assert len({tuple(s) for s in new}) == len({tuple(s) for s in shapes})  # distinct shapes stay distinct
    for a in range(len(shapes)):
        assert len(new[a]) == len(shapes[a])
        for b in range(len(shapes)):
            assert (old_numel[a] == old_numel[b]) == (numel[a] == numel[b])
            assert (old_numel[a] < old_numel[b]) == (numel[a] < numel[b])


def test_role_chains_match_the_recorder():
    """The runtime's torch-function chains make the recorder see the recorded role and label phase."""
    from collcheck.capture import callsite, frameworks

    roles = set(frameworks.ROLES.values()) | {"bucket rebuild"}
    phases = set(frameworks.PHASES.values())
    assert roles - {"bucket rebuild"} <= set(runtime.ROLE_FUNCTION), roles - set(runtime.ROLE_FUNCTION)
    assert phases <= set(runtime.PHASE_FUNCTION), phases - set(runtime.PHASE_FUNCTION)
    for role in roles:
        for phase in [None, *phases]:
            if role == "bucket rebuild" and phase not in ("DDP forward", "join() shadow"):
                continue  # the recorder labels bucket rebuilds with these phases only
            label = f"{phase}: {role}" if phase else role
            want_role, want_label = callsite._purpose(runtime.role_functions(role, label))
            assert want_role == role, (role, label)
            if phase and phase != "DDP init":
                assert want_label.startswith(phase), (role, label, want_label)
    assert callsite._purpose(runtime.role_functions("gradient bucket", "DDP backward: gradient bucket")) == (
        "gradient bucket", "DDP backward: gradient bucket")


def test_fsdp_roles_replay_with_their_module():
    """An FSDP2 role names its module; the replayed call is issued through a frame whose `self`
    names the same module, so the recorder sees the recorded role."""
    from collcheck.capture import callsite

    seen = []

    def probe():
        _, names, _, _ = callsite.walk(sys._getframe(1), False)
        seen.append(callsite._purpose(names))

    for role, phase in [("FSDP unshard all-gather of layers.3.experts.1", "FSDP2 forward"),
                        ("FSDP gradient reduce of the root module", "FSDP2 backward")]:
        runtime.call_as({"role": role, "label": f"{phase}: {role}", "s": ["/somewhere/train.py", 7, "step"]}, probe)
        assert seen[-1] == (role, f"{phase}: {role}"), seen[-1]


def test_trampoline_reports_the_recorded_site():
    seen = []

    def probe():
        f = sys._getframe(1)
        seen.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))

    runtime.trampoline("/somewhere/train.py", "<module>", 42)(probe)
    assert seen == [("/somewhere/train.py", 42, "<module>")]
