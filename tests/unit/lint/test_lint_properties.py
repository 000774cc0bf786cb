"""Generated programs: a call is flagged exactly when it issues collectives and runs under a
condition that differs per rank, whatever shape the program takes around it (a branch, its else,
an early return before it, a loop whose count comes from the condition, helpers one or two
functions down, the condition kept in a variable or returned by a helper)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collcheck.lint import lint_paths

# (source, per-rank?) — the condition's value
CONDITIONS = [("rank == 0", "rank"), ("dist.get_rank() % 2 == 1", "rank"), ('int(os.environ["LOCAL_RANK"]) > 0', "rank"),
              ("torch.isnan(loss).any()", "local"), ("step % 10 == 0", None), ("world > 1", None),
              ("args.local_rank != -1", None), ("loss is None", None)]
# (source, issues collectives?) — the call under it
CALLS = [("dist.all_reduce(t)", True), ("dist.barrier()", True), ("dist.broadcast(t, src=0)", True),
         ("torch.save(t, path)", False), ("print(t)", False), ("dist.send(t, dst=1)", False)]
SHAPES = ["branch", "else", "early_return", "loop"]


def _program(cond: str, call: str, shape: str, depth: int, via_flag: bool, via_helper_cond: bool):
    """The program's lines and the (call line, branch line) a finding must have if any."""
    lines = ["import os", "import torch", "import torch.distributed as dist", ""]
    callee = call
    for level in range(depth):  # helpers: helper0 calls the collective, helper1 calls helper0, ...
        lines += [f"def helper{level}(t, path):", f"    {callee}", ""]
        callee = f"helper{level}(t, path)"
    if via_helper_cond:
        lines += ["def decide(args, rank, loss, step, world):", f"    return {cond}", ""]
        cond = "decide(args, rank, loss, step, world)"
    lines += ["def train(args, t, loss, path, step, world):", "    rank = dist.get_rank()"]
    if via_flag:
        lines.append(f"    flag = {cond}")
        cond = "flag"
    if shape == "branch":
        lines += [f"    if {cond}:", f"        {callee}"]
        return lines, (len(lines), len(lines) - 1)
    if shape == "else":
        lines += [f"    if {cond}:", "        pass", "    else:", f"        {callee}"]
        return lines, (len(lines), len(lines) - 3)
    if shape == "early_return":
        lines += [f"    if {cond}:", "        return", f"    {callee}"]
        return lines, (len(lines), len(lines) - 2)
    lines += [f"    for _ in range(3 if {cond} else 4):", f"        {callee}"]
    return lines, (len(lines), len(lines) - 1)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(CONDITIONS), st.sampled_from(CALLS), st.sampled_from(SHAPES), st.integers(0, 2),
       st.booleans(), st.booleans())
def test_flagged_exactly_when_a_collective_runs_under_a_per_rank_condition(tmp_path_factory, cond, call, shape,
                                                                             depth, via_flag, via_helper_cond):
    (cond_src, per_rank), (call_src, collective) = cond, call
    lines, (call_line, branch_line) = _program(cond_src, call_src, shape, depth, via_flag, via_helper_cond)
    path = tmp_path_factory.mktemp("gen") / "train.py"
    path.write_text("\n".join(lines) + "\n")
    found = {(f.line, f.branch_line, f.kind) for f in lint_paths([path]).findings}
    expected = {(call_line, branch_line, per_rank)} if per_rank and collective else set()
    assert found == expected, "\n".join(lines)


@pytest.mark.slow
def test_every_combination(tmp_path):
    """The same property over every combination (2,304 programs), for the slow suite."""
    wrong = []
    for i, (cond, call, shape, depth, via_flag, via_helper_cond) in enumerate(itertools.product(
            CONDITIONS, CALLS, SHAPES, range(3), (False, True), (False, True))):
        lines, (call_line, branch_line) = _program(cond[0], call[0], shape, depth, via_flag, via_helper_cond)
        path = tmp_path / f"train{i}.py"
        path.write_text("\n".join(lines) + "\n")
        found = {(f.line, f.branch_line, f.kind) for f in lint_paths([path]).findings}
        expected = {(call_line, branch_line, cond[1])} if cond[1] and call[1] else set()
        if found != expected:
            wrong.append((cond[0], call[0], shape, depth, via_flag, via_helper_cond, found))
    assert not wrong, wrong[:5]
