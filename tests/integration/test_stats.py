"""`collcheck stats` on recorded scenarios: where communication time goes, per call site."""

from __future__ import annotations

import json
import os
import re

import pytest

from support.cli import run_cli, stats_json
from support.jobs import SCENARIOS, job, launch, marker_lines, program

SCENARIOS_DIR = str(SCENARIOS)


def recorded(corpus, name: str) -> str:
    rec = corpus(name)
    assert rec.rc == 0, rec.tail()
    return rec.run_dir


def line_of(name: str, text: str) -> int:
    with open(os.path.join(SCENARIOS_DIR, name, "main.py")) as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


@pytest.mark.recordings("scenario:per_param_allreduce")
def test_per_parameter_all_reduce_loop_is_one_site_with_every_call(corpus):
    """4 parameters x 3 steps, one all_reduce per gradient: one call site, 12 calls per rank of the
    gradients' median size, every byte of the group's traffic."""
    doc = stats_json(recorded(corpus, "scenario:per_param_allreduce"))
    (site,) = doc["sites"]
    assert site["site"]["line"] == line_of("per_param_allreduce", "dist.all_reduce(param.grad, op=")
    assert (site["api"], site["group"], site["ranks"], site["calls"]) == ("all_reduce", "0", [0, 1], 12)
    sizes = [16 * 32 * 4, 32 * 4, 32 * 4 * 4, 4 * 4]  # weight and bias gradients of Linear(16, 32), Linear(32, 4)
    assert site["bytes_per_call"] == sorted(sizes)[1] + (sorted(sizes)[2] - sorted(sizes)[1]) // 2
    assert 0 < site["median_us"] <= site["p99_us"] and site["total_s"] > 0
    assert site["busbw_mbs"] == site["algbw_mbs"]  # 2 ranks: an all-reduce's bus factor 2(n-1)/n is 1
    assert doc["groups"]["0"]["calls"] == 12 and doc["groups"]["0"]["bytes"] == 3 * sum(sizes)
    # the host's table (pairwise_groups' test, -m slow, has several groups at once): one group at a
    # time, timed on the all-reduce of the weight's gradient, once per step on each rank
    (host,) = doc["hosts"]
    assert host["ranks"] == [0, 1] and host["groups"] == ["0"] and host["cpus"] >= 1, host
    assert host["sample"] == {"api": "all_reduce", "bytes": 16 * 32 * 4}, host
    assert list(host["at_once"]) == ["1"] and host["at_once"]["1"]["collectives"] == 2 * 3, host


@pytest.mark.recordings("scenario:join_uneven_inputs")
def test_sites_are_ordered_by_the_time_spent_in_them(corpus):
    """DDP with join(): its gradient buckets, forward and set-up collectives are separate rows,
    each with what it is for; most time first."""
    run_dir = recorded(corpus, "scenario:join_uneven_inputs")
    doc = stats_json(run_dir)
    totals = [s["total_s"] for s in doc["sites"]]
    assert totals == sorted(totals, reverse=True) and len(doc["sites"]) >= 3, doc["sites"]
    assert "gradient bucket" in {s["role"] for s in doc["sites"]}
    text = run_cli("stats", run_dir, columns=220).out
    assert "time inside collectives, per call site" in text and "(gradient bucket)" in text


@pytest.mark.parametrize("name, text, per_loop", [
    pytest.param("per_param_allreduce", "dist.all_reduce(param.grad, op=", 4,
                 marks=pytest.mark.recordings("scenario:per_param_allreduce"), id="per_param_allreduce"),
    pytest.param("many_small_broadcasts", "dist.broadcast(", None,
                 marks=[pytest.mark.recordings("scenario:many_small_broadcasts"), pytest.mark.slow],
                 id="many_small_broadcasts")])
def test_the_first_hint_names_the_loop_to_fuse(corpus, name, text, per_loop):
    """Seed 000's pattern (an all_reduce per gradient) and seed 002's (a broadcast per tensor of
    the module state, -m slow): the first hint is to fuse that loop, at its call site, with the numbers."""
    hint = stats_json(recorded(corpus, f"scenario:{name}"))["hints"][0]
    assert hint["kind"] == "fuse" and hint["site"]["line"] == line_of(name, text), hint
    ev = hint["evidence"]
    assert 0 < ev["fused_s"] < ev["total_s"] and hint["gain_s"] > 0, hint
    if per_loop is not None:
        assert ev["per_loop"] == per_loop and ev["calls_per_rank"] == 3 * per_loop, hint


@pytest.mark.slow  # (the straggler rule in-process: tests/unit/stats/test_stats_hints.py)
@pytest.mark.recordings("straggler")
def test_the_straggler_table_names_the_rank_that_sleeps(corpus):
    """4 ranks, rank 2 sleeps 20-50 ms before each all-reduce, the others 0-5 ms: rank 2 caused the
    most waiting overall and came last to at least 90 % of the collectives (the first, start-up, is
    not charged)."""
    run_dir = recorded(corpus, "straggler")
    doc = stats_json(run_dir)
    assert doc["stragglers"][0]["rank"] == 2, doc["stragglers"]
    steps = [s for s in doc["slots"] if s["group"] == "0"]
    assert len(steps) >= 29 and sum(s["last"] == 2 for s in steps) >= 0.9 * len(steps), steps
    straggler = next(h for h in doc["hints"] if h["kind"] == "straggler")
    assert straggler["evidence"]["rank"] == 2 and straggler["site"]["line"] == marker_lines(program("straggler.py"))["step"]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("name, kind", [("per_param_allreduce", "fuse"), ("many_small_broadcasts", "fuse"),
                                        ("pairwise_groups", "batch")])
def test_the_fixed_variant_computes_the_same_and_needs_no_fix(name, kind, tmp_path):
    """scenarios/NAME/fixed.py (what the scenario's hint asks for) ends with the same results as
    main.py, and stats on it has no such hint left."""
    folder = os.path.join(SCENARIOS_DIR, name)
    with open(os.path.join(folder, "scenario.json")) as f:
        nproc = json.load(f)["nproc"]
    results = {}
    for variant in ("main", "fixed"):
        rec = launch(job(os.path.join(folder, f"{variant}.py"), nproc), str(tmp_path / variant))
        assert rec.rc == 0, rec.tail()
        results[variant] = sorted(re.findall(r"rank (\d+): [^\n]*?(checksum -?[\d.]+|ok=(?:True|False))", rec.stdout))
        kinds = [h["kind"] for h in stats_json(rec.run_dir)["hints"]]
        assert (kind in kinds) == (variant == "main"), kinds
    assert results["main"] == results["fixed"] and len(results["main"]) == 2, results


@pytest.mark.recordings("scenario:per_param_allreduce")
def test_the_perfetto_trace_shows_the_slices_stats_adds_up(corpus, tmp_path):
    """`collcheck export` of per_param_allreduce: per rank and call site, the collective slices'
    durations add up to what stats reports for that site; every charged slot's waiting is on the
    slices of the members that were early; one `steps` slice per step of each rank."""
    run_dir = recorded(corpus, "scenario:per_param_allreduce")
    doc = stats_json(run_dir)
    path = tmp_path / "trace.json"
    res = run_cli("export", run_dir, "-o", path)
    assert res.code == 0, res.err
    events = json.loads(path.read_text())["traceEvents"]
    collectives = [e for e in events if e["ph"] == "X" and e["cat"] == "collective"]
    per_rank: dict = {}
    for e in collectives:
        per_rank[e["pid"]] = per_rank.get(e["pid"], 0) + e["dur"]
    (site,) = doc["sites"]
    assert abs(max(per_rank.values()) / 1e6 - site["total_s"]) < 1e-5 * len(collectives), (per_rank, site)
    assert all(e["args"]["bytes"] > 0 for e in collectives)
    for slot in doc["slots"]:
        waits = [e["args"]["waited_for_last_us"] for e in collectives
                 if (e["args"]["group"], e["args"]["position"]) == (slot["group"], slot["position"])]
        assert len(waits) == 2 and abs(sum(waits) / 1e6 - slot["waited_s"]) < 2e-6, (waits, slot)
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert sorted(e["pid"] for e in steps) == [0, 0, 1, 1] and doc["steps"]["count"] == 2, steps


@pytest.mark.recordings("scenario:per_param_allreduce")
def test_steps_end_at_each_optimizer_step(corpus):
    """per_param_allreduce steps its SGD optimizer 3 times: 2 whole steps between them, each with
    its 4 all-reduces inside, a share of the step's time."""
    steps = stats_json(recorded(corpus, "scenario:per_param_allreduce"))["steps"]
    assert steps["count"] == 2 and 0 < steps["share"] <= 1, steps
    assert all(0 < c <= w for c, w in zip(steps["comm_s"], steps["wall_s"])), steps


@pytest.mark.slow  # (the overlap rule in-process: tests/unit/stats/test_stats_hints.py)
@pytest.mark.recordings("sync_then_work")
def test_a_synchronous_collective_followed_by_work_is_hinted_to_overlap(corpus):
    """Each step all-reduces synchronously then works 10 ms on something else: an `overlap` hint at
    the all-reduce's line, its gain bounded by the time inside it; the same steps issuing it with
    async_op (later in the same run): none for that line."""
    lines = marker_lines(program("sync_then_work.py"))
    doc = stats_json(recorded(corpus, "sync_then_work"))
    (hint,) = [h for h in doc["hints"] if h["kind"] == "overlap"]
    (site,) = [s for s in doc["sites"] if s["site"]["line"] == lines["reduce"]]
    assert hint["site"]["line"] == lines["reduce"] and 0 < hint["gain_s"] <= site["total_s"], (hint, site)
    assert 8000 < hint["evidence"]["median_gap_us"] < 100000, hint
    assert any(s["site"]["line"] == lines["async"] for s in doc["sites"]), doc["sites"]


@pytest.mark.slow
@pytest.mark.recordings("many_groups")
def test_groups_created_but_barely_used_are_hinted(corpus):
    """Six pairwise groups, one used 20 times, two once, three never: a `groups` hint at the
    new_group line listing the five barely used ones, with the time their creation took."""
    doc = stats_json(recorded(corpus, "many_groups"))
    (hint,) = [h for h in doc["hints"] if h["kind"] == "groups"]
    assert hint["site"]["line"] == marker_lines(program("many_groups.py"))["create"], hint
    used = hint["evidence"]["barely_used"]
    assert hint["evidence"]["created"] == 6 and sorted(used.values()) == [0, 0, 0, 1, 1], hint
    assert 0 < hint["evidence"]["creation_s"] == hint["gain_s"], hint
    busy = next(g for g, v in doc["groups"].items() if v["calls"] == 20)
    assert busy not in used, (busy, used)


@pytest.mark.slow  # (the batch and contention rules in-process: tests/unit/stats/test_stats_hints.py)
@pytest.mark.recordings("scenario:pairwise_groups")
def test_pairwise_groups_show_the_cost_per_collective_and_what_drives_it(corpus):
    """Seed 001's program (a group per pair of ranks, 200 small all-reduces in each; 2 pairs): the
    report shows, per host, the all-reduce's cost against the number of groups communicating at
    once, and a `batch` hint at the all-reduce's line: each call's time is its fixed cost."""
    run_dir = recorded(corpus, "scenario:pairwise_groups")
    doc = stats_json(run_dir)
    (host,) = doc["hosts"]
    assert host["ranks"] == [0, 1, 2, 3] and host["cpus"] >= 1 and host["sample"] == {"api": "all_reduce", "bytes": 400}
    assert sum(c["collectives"] for c in host["at_once"].values()) == 4 * 200, host
    assert max(host["at_once"], key=lambda k: host["at_once"][k]["collectives"]) == "2", host  # both pairs at once
    line = line_of("pairwise_groups", "dist.all_reduce(x, group=pair)")
    (hint,) = [h for h in doc["hints"] if h["kind"] == "batch"]
    ev = hint["evidence"]
    assert hint["site"]["line"] == line and ev["calls_per_rank"] == 200 and ev["same_in_groups"] == 2, hint
    assert ev["move_us"] < 0.25 * ev["median_us"] and 0 < ev["batched_s"] < ev["total_s"], hint
    text = run_cli("stats", run_dir, columns=200).out
    assert "against the groups communicating at once" in text and "4 ranks on" in text, text


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("pairs", [1, 3, 4])
def test_one_to_four_pairs_each_show_their_groups_and_the_fixed_cost(pairs, tmp_path):
    """Seed 001 at 1, 3 and 4 pairs (2: the shared recording, test above): every pair's group has its 200
    all-reduces, the host's table counts them against the groups communicating at once, and the
    `batch` hint names the all-reduce's line."""
    rec = launch(job(os.path.join(SCENARIOS_DIR, "pairwise_groups", "main.py"), 2 * pairs,
                     env={"SCENARIO_TIMEOUT_S": "120"}, timeout=240), str(tmp_path))
    assert rec.rc == 0, rec.tail()
    doc = stats_json(rec.run_dir)
    pair_groups = [g for g in doc["groups"] if g != "0"]  # (the default group is "0")
    assert len(pair_groups) == pairs and all(doc["groups"][g]["calls"] == 200 for g in pair_groups), doc["groups"]
    (host,) = doc["hosts"]
    assert sum(c["collectives"] for c in host["at_once"].values()) == 2 * pairs * 200, host
    (hint,) = [h for h in doc["hints"] if h["kind"] == "batch"]
    assert hint["site"]["line"] == line_of("pairwise_groups", "dist.all_reduce(x, group=pair)"), hint
    assert hint["evidence"].get("same_in_groups", 1) == pairs, hint


@pytest.mark.parametrize("name", [
    pytest.param("scenario:per_param_allreduce", marks=pytest.mark.recordings("scenario:per_param_allreduce")),
    pytest.param("scenario:join_uneven_inputs", marks=pytest.mark.recordings("scenario:join_uneven_inputs")),
    pytest.param("straggler", marks=[pytest.mark.recordings("straggler"), pytest.mark.slow]),
    pytest.param("sync_then_work", marks=[pytest.mark.recordings("sync_then_work"), pytest.mark.slow])])
def test_recorded_runs_give_the_same_report_from_columns_folded_alone_and_from_decoded_events(corpus, name):
    """On real recordings, in-process: the statistics from the scan's columns (ranks with equal
    columns folded), from them each rank alone, and from every event decoded again (a run loaded
    without the times) are one report, text and JSON."""
    import io

    from collcheck.model import load_run
    from collcheck.report.stats import render_text, to_dict
    from collcheck.stats.summary import compute

    def report(st) -> tuple[str, str]:
        text = io.StringIO()
        render_text(st, text, top=1000)
        return json.dumps(to_dict(st)), text.getvalue()

    run_dir = recorded(corpus, name)
    run = load_run(run_dir, times=True)
    ways = [report(compute(run)), report(compute(run, fold=False)), report(compute(load_run(run_dir)))]
    assert ways[0] == ways[1] == ways[2]
    assert json.loads(ways[0][0])["sites"]
