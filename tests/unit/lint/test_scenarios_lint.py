"""`collcheck lint` on the repo's scenarios and bug programs: each bug that is a per-rank branch
is found at its call and branch, valid scenarios give nothing (scenario.json's `lint`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collcheck.lint import lint_paths

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = sorted(p.parent.name for p in (ROOT / "scenarios").glob("*/scenario.json"))
PROGRAMS = ROOT / "tests" / "integration" / "programs"


def _spec(name: str) -> dict:
    return json.loads((ROOT / "scenarios" / name / "scenario.json").read_text())


@pytest.mark.parametrize("name", SCENARIOS)
def test_each_scenario_is_linted_as_its_spec_says(name):
    spec = _spec(name)
    assert ("lint" in spec) != ("lint_out_of_scope" in spec), "a scenario says what lint finds, or why not"
    assert not spec["valid"] or spec["lint"] == [], "a valid scenario gives no finding"
    found = lint_paths([ROOT / "scenarios" / name / "main.py"]).findings
    got = sorted([f.line, f.branch_line] for f in found)
    if "lint" in spec:
        assert got == sorted(spec["lint"])
        assert all(f.path.endswith("main.py") and f.fix and f.why for f in found)
    else:
        assert got == [], spec["lint_out_of_scope"]


def test_the_rank_branch_scenarios_are_most_of_the_invalid_ones():
    """The lint's reach on the scenarios, so that a regression which empties `lint` lists shows."""
    specs = [_spec(n) for n in SCENARIOS]
    flagged = [s for s in specs if s.get("lint")]
    assert len(flagged) >= 13 and all(not s["valid"] for s in flagged)


# the framework bug programs: each bug case is a branch the lint must find, at these lines
FRAMEWORK_BUGS = {
    "fw_accelerate.py": {(43, 42)},
    "fw_deepspeed.py": {(47, 46)},
    "fw_lightning.py": {(47, 46)},
    "mesh_rank0_full_tensor.py": {(17, 16)},
    "tp_branch.py": {(40, 39)},
    "dcp_rank0.py": {(22, 21)},
}


@pytest.mark.parametrize("program", sorted(FRAMEWORK_BUGS))
def test_framework_bug_programs_are_flagged_at_their_bug_case(program):
    found = lint_paths([PROGRAMS / program]).findings
    assert {(f.line, f.branch_line) for f in found} == FRAMEWORK_BUGS[program]
    assert all(f.kind == "rank" for f in found)


@pytest.mark.parametrize("program", [
    pytest.param("fw_transformers.py", marks=pytest.mark.slow),  # (reads the transformers package cold: 10-30 s)
    "frameworks.py", "pipeline_ok.py", "every_op.py", "batch_ring.py", "join_uneven_inputs", "subgroup_members_only"])
def test_correct_programs_give_no_finding(program):
    path = PROGRAMS / program if program.endswith(".py") else ROOT / "scenarios" / program / "main.py"
    assert lint_paths([path]).findings == []
