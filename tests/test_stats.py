"""`collcheck stats` on recorded scenarios: where communication time goes, per call site."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
