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
    most waiting overall and came last to at least 90 % of the collectives (the first, start-up, is
    not charged)."""
    rc, _, err, run_dir = torchrun(program("straggler.py"), 4, tmp_path, timeout=150)
    assert rc == 0, err[-3000:]
    doc = stats_json(run_dir)
    assert doc["stragglers"][0]["rank"] == 2, doc["stragglers"]
    steps = [s for s in doc["slots"] if s["group"] == "0"]
    assert len(steps) >= 29 and sum(s["last"] == 2 for s in steps) >= 0.9 * len(steps), steps
    straggler = next(h for h in doc["hints"] if h["kind"] == "straggler")
    assert straggler["evidence"]["rank"] == 2 and straggler["site"]["line"] == marker_lines(program("straggler.py"))["step"]


@pytest.mark.parametrize("last_in, slots, members, hinted", [
    (9, 12, 2, False), (11, 12, 2, False), (12, 12, 2, True), (10, 10, 2, True), (27, 30, 4, True),
    (9, 12, 4, True), (5, 6, 4, False), (30, 40, 2, False), (38, 40, 2, True)])
def test_a_straggler_hint_needs_more_lasts_than_chance_gives(last_in, slots, members, hinted):
    """Of two ranks each comes last about half the time: 9 of 12 lasts is chance (7 %) and gives no
    hint, even with much waiting (start-up skew in a short run); 12 of 12 does."""
    from collcheck.stats.hints import straggler_hints
    from collcheck.stats.skew import Skew, Straggler

    top = Straggler(1, wait_caused_us=2e5, last_in=last_in, slots=slots, expected_last=slots / members)
    rest = [Straggler(r, 1e3, 0, slots, slots / members) for r in range(2, members + 1)]
    skew = Skew({}, [top, *rest], [("0", i, 1, 1e4, ("t.py", 5, "f")) for i in range(last_in)])
    assert bool(straggler_hints(skew, [])) == hinted


def test_a_rank_last_only_because_its_previous_collective_completed_later_is_no_straggler():
    """Two ranks all-reducing back to back: the same rank gets the last message of each and issues
    the next one last, every time, though its work took no longer: the waiting its work explains
    (a twentieth here) is too little for a hint; most of it is."""
    from collcheck.stats.hints import straggler_hints
    from collcheck.stats.skew import Skew, Straggler

    for caused, hinted in ((0.05, False), (0.9, True)):
        slots = [("1", i, 1, 1e3, ("t.py", 5, "f"), 0.0) for i in range(400)]
        top = Straggler(1, wait_caused_us=caused * 400 * 1e3, last_in=400, slots=400, expected_last=200)
        skew = Skew({}, [top, Straggler(0, 0.0, 0, 400, 200)], slots)
        assert bool(straggler_hints(skew, [])) == hinted


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
        rc, out, err, run_dir = torchrun(os.path.join(folder, f"{variant}.py"), nproc, tmp_path / variant, timeout=120)
        assert rc == 0, err[-3000:]
        results[variant] = sorted(re.findall(r"rank (\d+): [^\n]*?(checksum -?[\d.]+|ok=(?:True|False))", out))
        kinds = [h["kind"] for h in stats_json(run_dir)["hints"]]
        assert (kind in kinds) == (variant == "main"), kinds
    assert results["main"] == results["fixed"] and len(results["main"]) == 2, results


def test_the_perfetto_trace_shows_the_slices_stats_adds_up(scenario_run, tmp_path):
    """`collcheck export` of per_param_allreduce: per rank and call site, the collective slices'
    durations add up to what stats reports for that site; every charged slot's waiting is on the
    slices of the members that were early; one `steps` slice per step of each rank."""
    rc, run_dir, output = scenario_run("per_param_allreduce")
    assert rc == 0, output[-2000:]
    doc = stats_json(run_dir)
    path = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "collcheck", "export", run_dir, "-o", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
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


def test_steps_end_at_each_optimizer_step(scenario_run):
    """per_param_allreduce steps its SGD optimizer 3 times: 2 whole steps between them, each with
    its 4 all-reduces inside, a share of the step's time."""
    rc, run_dir, output = scenario_run("per_param_allreduce")
    assert rc == 0, output[-2000:]
    steps = stats_json(run_dir)["steps"]
    assert steps["count"] == 2 and 0 < steps["share"] <= 1, steps
    assert all(0 < c <= w for c, w in zip(steps["comm_s"], steps["wall_s"])), steps


@pytest.mark.timeout(180)
def test_a_synchronous_collective_followed_by_work_is_hinted_to_overlap(tmp_path):
    """Each step all-reduces synchronously then works 10 ms on something else: an `overlap` hint at
    the all-reduce's line, its gain bounded by the time inside it; the same steps issuing it with
    async_op (later in the same run): none for that line."""
    lines = marker_lines(program("sync_then_work.py"))
    rc, _, err, run_dir = torchrun(program("sync_then_work.py"), 2, tmp_path, timeout=150)
    assert rc == 0, err[-3000:]
    doc = stats_json(run_dir)
    (hint,) = [h for h in doc["hints"] if h["kind"] == "overlap"]
    (site,) = [s for s in doc["sites"] if s["site"]["line"] == lines["reduce"]]
    assert hint["site"]["line"] == lines["reduce"] and 0 < hint["gain_s"] <= site["total_s"], (hint, site)
    assert 8000 < hint["evidence"]["median_gap_us"] < 100000, hint
    assert any(s["site"]["line"] == lines["async"] for s in doc["sites"]), doc["sites"]


@pytest.mark.timeout(180)
def test_groups_created_but_barely_used_are_hinted(tmp_path):
    """Six pairwise groups, one used 20 times, two once, three never: a `groups` hint at the
    new_group line listing the five barely used ones, with the time their creation took."""
    rc, _, err, run_dir = torchrun(program("many_groups.py"), 4, tmp_path, timeout=150)
    assert rc == 0, err[-3000:]
    doc = stats_json(run_dir)
    (hint,) = [h for h in doc["hints"] if h["kind"] == "groups"]
    assert hint["site"]["line"] == marker_lines(program("many_groups.py"))["create"], hint
    used = hint["evidence"]["barely_used"]
    assert hint["evidence"]["created"] == 6 and sorted(used.values()) == [0, 0, 0, 1, 1], hint
    assert 0 < hint["evidence"]["creation_s"] == hint["gain_s"], hint
    busy = next(g for g, v in doc["groups"].items() if v["calls"] == 20)
    assert busy not in used, (busy, used)


def test_pairwise_groups_show_the_cost_per_collective_and_what_drives_it(scenario_run):
    """Seed 001's program (a group per pair of ranks, 200 small all-reduces in each; 2 pairs): the
    report shows, per host, the all-reduce's cost against the number of groups communicating at
    once, and a `batch` hint at the all-reduce's line: each call's time is its fixed cost."""
    rc, run_dir, output = scenario_run("pairwise_groups")
    assert rc == 0, output[-2000:]
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
    text = subprocess.run([sys.executable, "-m", "collcheck", "stats", run_dir], capture_output=True, text=True,
                          timeout=120, check=False, env=dict(os.environ, COLUMNS="200")).stdout
    assert "against the groups communicating at once" in text and "4 ranks on" in text, text


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("pairs", [1, 3, 4])
def test_one_to_four_pairs_each_show_their_groups_and_the_fixed_cost(pairs, tmp_path):
    """Seed 001 at 1, 3 and 4 pairs (2 is in the default run): every pair's group has its 200
    all-reduces, the host's table counts them against the groups communicating at once, and the
    `batch` hint names the all-reduce's line."""
    rc, _, err, run_dir = torchrun(os.path.join(SCENARIOS_DIR, "pairwise_groups", "main.py"), 2 * pairs, tmp_path,
                                   timeout=240, env={"SCENARIO_TIMEOUT_S": "120"})
    assert rc == 0, err[-3000:]
    doc = stats_json(run_dir)
    pair_groups = [g for g in doc["groups"] if g != "0"]  # (the default group is "0")
    assert len(pair_groups) == pairs and all(doc["groups"][g]["calls"] == 200 for g in pair_groups), doc["groups"]
    (host,) = doc["hosts"]
    assert sum(c["collectives"] for c in host["at_once"].values()) == 2 * pairs * 200, host
    (hint,) = [h for h in doc["hints"] if h["kind"] == "batch"]
    assert hint["site"]["line"] == line_of("pairwise_groups", "dist.all_reduce(x, group=pair)"), hint
    assert hint["evidence"].get("same_in_groups", 1) == pairs, hint


def test_contention_needs_a_slowdown_measured_on_enough_collectives():
    from collcheck.stats.concurrency import HostLoad
    from collcheck.stats.groups import contention_hints

    def host(by_count):
        return HostLoad("h", list(range(8)), 2, 1, ["1", "2", "3", "4"], ("all_reduce", 400), ("m.py", 3, "f"),
                        {k: [us] * n for k, (n, us) in by_count.items()})

    assert contention_hints([host({2: (50, 300.0), 4: (900, 1000.0)})])[0].evidence["at_once"] == {2: 300.0, 4: 1000.0}
    assert not contention_hints([host({2: (50, 300.0), 4: (900, 400.0)})])  # 1.3x: not enough
    assert not contention_hints([host({2: (5, 300.0), 4: (900, 1000.0)})])  # 5 collectives: too few to compare
    assert not contention_hints([host({4: (900, 1000.0)})])  # nothing to compare with


def test_a_batch_hint_says_what_groups_at_once_and_crowded_cpus_did():
    from collcheck.stats.concurrency import HostLoad
    from collcheck.stats.hints import batch_hints
    from collcheck.stats.sites import SiteStats

    site = SiteStats(("m.py", 3, "f"), "all_reduce", "allreduce_", "1", None, ranks=[0, 1], calls=200,
                     bytes_per_call=400, durations_us=[300.0] * 400, per_rank_us={0: 6e4, 1: 6e4})
    crowded = HostLoad("h", list(range(8)), 2, 1, ["1", "2"], ("all_reduce", 400), ("m.py", 3, "f"),
                       {1: [300.0] * 20, 2: [900.0] * 380})
    (hint,) = batch_hints([site], set(), [crowded])
    assert "with 1 group communicating at once on host h: 300 µs; with 2: 900 µs" in hint.text, hint.text
    assert "8 ranks share 2 CPUs there" in hint.text and hint.evidence["move_us"] == 4.0, hint.text
    crowded.by_count = {1: [300.0] * 20, 2: [320.0] * 380}  # measured: more at once cost no more
    (hint,) = batch_hints([site], set(), [crowded])
    assert "with 2: 320 µs" in hint.text and "CPUs there" not in hint.text, hint.text
    roomy = HostLoad("h", [0, 1], 8, 1, ["1"], ("all_reduce", 400), ("m.py", 3, "f"), {1: [300.0] * 400})
    (hint,) = batch_hints([site], set(), [roomy])
    assert "CPUs there" not in hint.text and "at once" not in hint.text, hint.text
    assert not batch_hints([site], {("m.py", 3, "f")}, [roomy])  # a fuse hint covers that line
