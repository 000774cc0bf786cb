"""`collcheck stats` on recorded scenarios: where communication time goes, per call site."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import marker_lines, program, torchrun

from collcheck.demo import SCENARIOS_DIR


def stats_json(run_dir: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "collcheck", "stats", run_dir, "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def line_of(name: str, text: str) -> int:
    with open(os.path.join(SCENARIOS_DIR, name, "main.py")) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


def test_per_parameter_all_reduce_loop_is_one_site_with_every_call(scenario_run):
    """4 parameters x 3 steps, one all_reduce per gradient: one call site, 12 calls per rank of the
    gradients' median size, every byte of the group's traffic."""
    rc, run_dir, output = scenario_run("per_param_allreduce")
    assert rc == 0, output[-2000:]
    doc = stats_json(run_dir)
    (site,) = doc["sites"]
    assert site["site"]["line"] == line_of("per_param_allreduce", "dist.all_reduce(param.grad, op=")
    assert (site["api"], site["group"], site["ranks"], site["calls"]) == ("all_reduce", "0", [0, 1], 12)
    sizes = [16 * 32 * 4, 32 * 4, 32 * 4 * 4, 4 * 4]  # weight and bias gradients of Linear(16, 32), Linear(32, 4)
    assert site["bytes_per_call"] == sorted(sizes)[1] + (sorted(sizes)[2] - sorted(sizes)[1]) // 2
    assert 0 < site["median_us"] <= site["p99_us"] and site["total_s"] > 0
    assert site["busbw_mbs"] == site["algbw_mbs"]  # 2 ranks: an all-reduce's bus factor 2(n-1)/n is 1
    assert doc["groups"]["0"]["calls"] == 12 and doc["groups"]["0"]["bytes"] == 3 * sum(sizes)


def test_sites_are_ordered_by_the_time_spent_in_them(scenario_run):
    """DDP (seed 004, case 1): its gradient buckets, forward and set-up collectives are separate rows,
    each with what it is for; most time first."""
    rc, run_dir, output = scenario_run("seed004_case1")
    assert rc == 0, output[-2000:]
    doc = stats_json(run_dir)
    totals = [s["total_s"] for s in doc["sites"]]
    assert totals == sorted(totals, reverse=True) and len(doc["sites"]) >= 3, doc["sites"]
    assert "gradient bucket" in {s["role"] for s in doc["sites"]}
    text = subprocess.run([sys.executable, "-m", "collcheck", "stats", run_dir], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, COLUMNS="220")).stdout
    assert "time inside collectives, per call site" in text and "(gradient bucket)" in text


def test_the_first_hint_names_the_loop_to_fuse(scenario_run):
    """Seed 000's pattern (an all_reduce per gradient) and seed 002's (a broadcast per tensor of
    the module state): the first hint is to fuse that loop, at its call site, with the numbers."""
    for name, text, per_loop in (("per_param_allreduce", "dist.all_reduce(param.grad, op=", 4),
                                 ("many_small_broadcasts", "dist.broadcast(", None)):
        rc, run_dir, output = scenario_run(name)
        assert rc == 0, output[-2000:]
        hint = stats_json(run_dir)["hints"][0]
        assert hint["kind"] == "fuse" and hint["site"]["line"] == line_of(name, text), hint
        ev = hint["evidence"]
        assert 0 < ev["fused_s"] < ev["total_s"] and hint["gain_s"] > 0, hint
        if per_loop is not None:
            assert ev["per_loop"] == per_loop and ev["calls_per_rank"] == 3 * per_loop, hint


@pytest.mark.timeout(180)
def test_the_straggler_table_names_the_rank_that_sleeps(tmp_path):
    """4 ranks, rank 2 sleeps 20-50 ms before each all-reduce, the others 0-5 ms: rank 2 caused the
    most waiting overall and came last to at least 90 % of the collectives."""
    rc, _, err, run_dir = torchrun(program("straggler.py"), 4, tmp_path, timeout=150)
    assert rc == 0, err[-3000:]
    doc = stats_json(run_dir)
    assert doc["stragglers"][0]["rank"] == 2, doc["stragglers"]
    steps = [s for s in doc["slots"] if s["group"] == "0"]
    assert len(steps) >= 30 and sum(s["last"] == 2 for s in steps) >= 0.9 * len(steps), steps
    straggler = next(h for h in doc["hints"] if h["kind"] == "straggler")
    assert straggler["evidence"]["rank"] == 2 and straggler["site"]["line"] == marker_lines(program("straggler.py"))["step"]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["per_param_allreduce", "many_small_broadcasts"])
def test_the_fixed_variant_computes_the_same_and_needs_no_fusing(name, tmp_path):
    """scenarios/NAME/fixed.py (what the first hint asks for) ends with the same results as main.py,
    and stats on it has no `fuse` hint left."""
    folder = os.path.join(SCENARIOS_DIR, name)
    results = {}
    for variant in ("main", "fixed"):
        rc, out, err, run_dir = torchrun(os.path.join(folder, f"{variant}.py"), 2, tmp_path / variant, timeout=120)
        assert rc == 0, err[-3000:]
        results[variant] = sorted(re.findall(r"rank \d+: [^\n]*?(?:checksum -?[\d.]+|ok=(?:True|False))", out))
        kinds = [h["kind"] for h in stats_json(run_dir)["hints"]]
        assert ("fuse" in kinds) == (variant == "main"), kinds
    assert results["main"] == results["fixed"] and len(results["main"]) == 2, results


def test_steps_end_at_each_optimizer_step(scenario_run):
    """per_param_allreduce steps its SGD optimizer 3 times: 2 whole steps between them, each with
    its 4 all-reduces inside, a share of the step's time."""
    rc, run_dir, output = scenario_run("per_param_allreduce")
    assert rc == 0, output[-2000:]
    steps = stats_json(run_dir)["steps"]
    assert steps["count"] == 2 and 0 < steps["share"] <= 1, steps
    assert all(0 < c <= w for c, w in zip(steps["comm_s"], steps["wall_s"])), steps
