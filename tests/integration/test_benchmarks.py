"""The benchmarks (benchmarks/, scripts beside the package) run end to end at toy sizes (their
figures are in docs/benchmarks.md; speed is never asserted here: these machines are too noisy for
timed tests)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def bench(name: str) -> str:
    return os.path.join(BENCHMARKS, f"{name}.py")


def run_json(name: str, *args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, bench(name), *args, "--json"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_tui_previews_then_scrolls():
    (res,) = run_json("bench_tui", "--ranks", "16", "--events", "400", "--pages", "3",
                      "--preview-bytes", "0", "--preview-events", "1600")
    # at this toy size the full load can paint before the preview does (the preview itself is
    # tested with the full load held back: tests/unit/tui/test_tui_views.py)
    assert res["preview"] in (0, 100) and res["rows"] == 400 and res["columns"] == 1
    assert 0 < res["first_screen_s"] <= res["full_s"] and res["scroll_pages"] == 3
    assert res["last_row"] > 0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_tui_times_the_partial_first_screen_then_the_verdicts():
    """From 1,024 logs the loader process's first screen is partial (its first 256 logs), then
    the first screen with its verdict comes; --summaries times a log's summary read, --stages the
    loader's steps to the first screen with its verdict."""
    (res,) = run_json("bench_tui", "--ranks", "1024", "--events", "40", "--pages", "2", "--child", "on")
    assert res["first"] == "loader process" and res["partial"] in (None, {"read": 256, "total": 1024})
    assert 0 < res["first_screen_s"] <= res["judged_s"] <= res["full_s"] and res["columns"] == 1
    (timed,) = run_json("bench_tui", "--ranks", "16", "--events", "40", "--summaries", "8")
    assert timed["logs"] == 8 and timed["summary_us"] > 0 and timed["python_us"] > 0 and timed["compiled_us"] != 0
    (steps,) = run_json("bench_tui", "--ranks", "16", "--events", "40", "--stages")
    assert list(steps) == [f"{s}_s" for s in ("summaries", "build", "analyse", "grid", "panes", "page")]
    assert all(v > 0 for v in steps.values())


@pytest.mark.timeout(300)
def test_bench_diff_reports_throughput():
    results = run_json("bench_diff", "--ranks", "8", "--events", "500")
    assert results and results[-1]["ranks"] == 8


def test_bench_diff_times_the_command_and_finds_the_injected_divergence():
    """--cli --diverge: the command's own wall time and peak RSS, and the drawn rank and slot
    found exactly (the size the docs quote, scaled down)."""
    (row,) = run_json("bench_diff", "--ranks", "16", "--events", "600", "--groups", "2", "--cli", "--diverge", "shape",
                      "--seed", "5")
    assert (row["exit"], row["verdict"], row["found"]) == (1, "mismatch", "exact")
    assert row["cli_s"] > 0 and row["cli_peak_rss_mb"] > 10


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_diff_runs_two_trees_alternating_side_by_side(tmp_path):
    """--against: each child imports collcheck from the tree it was given, the trees take turns
    (this, other, other, this), and the medians and ratios are those of the rounds."""
    other = tmp_path / "prev"
    shutil.copytree(os.path.join(ROOT, "collcheck"), other / "collcheck", ignore=shutil.ignore_patterns("__pycache__"))
    (res,) = run_json("bench_diff", "--ranks", "4", "--events", "300", "--against", str(other), "--repeat", "2")
    trees = {"this": os.path.realpath(ROOT), "other": os.path.realpath(other)}
    for label, tree in trees.items():
        rounds = res[label]["rounds"]
        assert os.path.realpath(res[label]["tree"]) == tree
        assert [os.path.realpath(r["source"]) for r in rounds] == [tree, tree]
        assert [(r["verdict"], r["total_events"]) for r in rounds] == [("clean", 1200)] * 2
        for key in ("load_s", "analyse_s", "peak_rss_mb"):
            assert res[label][key] == pytest.approx(statistics.median(r[key] for r in rounds))
    assert [r["order"] for r in res["this"]["rounds"]] == [0, 3]
    assert [r["order"] for r in res["other"]["rounds"]] == [1, 2]
    for key in ("load_s", "analyse_s", "peak_rss_mb"):
        assert res["ratio"][key] == pytest.approx(res["this"][key] / res["other"][key])
    table = subprocess.run([sys.executable, bench("bench_diff"), "--ranks", "4", "--events", "300", "--against",
                            str(other), "--repeat", "1"], capture_output=True, text=True, timeout=240)
    assert table.returncode == 0, table.stderr[-3000:]
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"this: {ROOT}   other: {other}   1 rounds each")
    assert [line.split()[:2] for line in lines[-3:]] == [["load", "s"], ["analyse", "s"], ["peak", "RSS"]]
    assert all(line.endswith("x") for line in lines[-3:])
    missing = subprocess.run([sys.executable, bench("bench_diff"), "--against", str(tmp_path)],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "not a collcheck source tree" in missing.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_stats_times_the_command_with_two_trees_on_one_run(tmp_path):
    """--against: the command's wall time and peak RSS with each tree on the same logs, and whether
    their reports are the same (this tree against itself: they are); --dir keeps the run; --phases
    times reading, the statistics and the report apart."""
    (row,) = run_json("bench_stats", "--ranks", "16", "--events", "300", "--groups", "2", "--against", ROOT,
                      "--dir", str(tmp_path), "--phases")
    assert row["same"] and row["this"]["exits"] == row["other"]["exits"] == [0]
    assert set(row["this"]["phases"]) == {"load_s", "compute_s", "compute_cpu_s", "render_s"}
    assert row["this"]["s"] > 0 and row["other"]["peak_rss_mb"] > 10 and row["bytes"] > 0
    assert os.listdir(tmp_path / "16x300")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_many_groups_times_each_command_per_size():
    """Two runs of many groups: diff, stats and the TUI's first screen each timed in a process of
    its own, the runs clean, the cost per added group computed from the two."""
    small, big = run_json("bench_many_groups", "--groups", "600", "--scaling", "200")
    assert (small["groups"], big["groups"]) == (200, 600) and big["bytes"] > small["bytes"] > 0
    for row in (small, big):
        assert row["diff"]["exit"] == 0 and row["diff"]["verdict"] == "clean", row
        assert row["stats"]["exit"] == 0 and row["tui"]["exit"] == 0 and not row["tui"]["error"], row
        # stats' groups table shows --top groups: a few dozen lines, not one per group
        assert row["stats"]["lines"] < 200, row
        for c in ("diff", "stats", "tui"):
            assert row[c]["s"] > 0 and row[c]["peak_rss_mb"] > 10 and row[c]["within"] in (True, False)
    assert small["diff"]["us_per_added_group"] is None
    assert big["diff"]["us_per_added_group"] == pytest.approx((big["diff"]["s"] - small["diff"]["s"]) / 400 * 1e6)


@pytest.mark.timeout(120)
def test_bench_fr_json_refuses_a_dump_of_more_values_within_the_limit():
    """25 MiB of empty entries (8.7 million values) under a 1 GiB address-space limit: one line,
    exit 2, far below the limit."""
    (res,) = run_json("bench_fr_json", "--mib", "25", "--limit-gib", "1")
    assert res["exit"] == 2 and res["lines"] == 1 and "more than 8,388,608 values" in res["stderr"], res
    assert res["bounded"] and res["peak_rss_mb"] < 512, res


def _report_json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout[proc.stdout.rindex("\n{") + 1:])  # the report, then its figures as JSON


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_record_measures_every_variant(fastpath_env, monkeypatch):
    """The micro benchmark at toy size, on the compiled path (built): every variant timed, the
    in-process difference computed, the recorded log counted."""
    for key, value in fastpath_env.items():
        monkeypatch.setenv(key, value)
    micro = _report_json(subprocess.run([sys.executable, bench("bench_record"), "--rounds", "2", "--calls", "100",
                                         "--launches", "1", "--json"], capture_output=True, text=True, timeout=240))["micro"]
    assert micro["path"] == "compiled" and micro["log_colls"] > 0 and micro["log_bytes"] > 0
    assert all(micro["median_us"][v] > 0 for v in ("plain", "off", "paused", "record", "nolive", "detail", "nofr"))
    assert micro["calls"] == 1 * 2 * 7 * 100 and isinstance(micro["in_process_added_us"], float)
    assert micro["flight_recorder_added_us"] == micro["median_us"]["plain"] - micro["median_us"]["nofr"]
    assert isinstance(micro["in_process_paused_us"], float)
    assert micro["log_colls"] >= 1 * 2 * 100  # every recorded round, over the logs of each enable


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_bench_stages_times_every_stage_of_the_cached_path(fastpath_env, monkeypatch):
    """The stage-clock build (compiled on first use), one launch at toy size: the recorded calls
    after the warm-up took the path without the GIL (a few may leave it to Python: a queued
    record of live mode's), every stage was timed, and the callbacks that ran (an op complete
    before its callback is registered has none); then the kernel's parts by the wall."""
    for key, value in fastpath_env.items():
        monkeypatch.setenv(key, value)
    res = _report_json(subprocess.run([sys.executable, bench("bench_stages"), "--launches", "1", "--calls", "500",
                                       "--parts", "2", "--part-calls", "50", "--json"],
                                      capture_output=True, text=True, timeout=560))
    (run,) = res["runs"]
    # --parts: every part timed in each round, in the same process; the paused rounds unrecorded
    assert set(run["parts"]) == {"paused", "hop", "unwatched", "whole"}
    assert all(len(v) == 2 and all(ns > 0 for ns in v) for v in run["parts"].values())
    assert set(res["parts_added_ns"]) == {"hop", "unwatched", "whole"}
    assert 450 <= run["calls"] <= 500 and run["ticks_per_ns"] > 0
    assert 0 < run["call_median_ns"] < 10 * res["ours_ns"] and run["call_median_torch_ns"] > 0
    assert all(ns > 0 for ns in res["median_ns"].values())
    assert 0 <= run["callbacks"] <= run["calls"] + 10 and (res["callback_ns"] > 0) == (run["callbacks"] > 0)
    assert res["median_ns"]["torch (redispatch)"] > res["ours_ns"] / 10


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_bench_steps_measures_ddp_fsdp_and_both_paths(fastpath_env, monkeypatch):
    """All three sections at toy sizes: DDP and FSDP2 on 2 ranks (plain and recorded launches),
    world-size-1 DDP on both paths; every recorded launch has recorded and paused blocks."""
    for key, value in fastpath_env.items():
        monkeypatch.setenv(key, value)
    res = _report_json(subprocess.run([sys.executable, bench("bench_steps"), "--pairs", "1", "--steps", "40",
                                       "--fsdp-steps", "40", "--world1-launches", "1", "--world1-steps", "40", "--json"],
                                      capture_output=True, text=True, timeout=400))
    for model, min_colls in (("ddp", 1), ("fsdp", 4)):  # FSDP2: all-gathers and reduce-scatters per layer
        (pair,) = res[model]
        assert pair["plain"]["step_ms"]["plain"] > 0 and pair["record"]["path"] == "compiled"
        assert pair["record"]["ratio"] > 0 and pair["record"]["colls_per_step"] >= min_colls
    for path in ("python", "compiled"):
        (launch,) = res["world1"][path]
        assert launch["ratio"] > 0 and launch["colls_per_step"] >= 2  # DDP's bucket all-reduce + join flag


def test_paired_ratio_compares_recorded_blocks_with_their_neighbours():
    sys.path.insert(0, BENCHMARKS)
    try:
        from bench_steps import paired_ratio
    finally:
        sys.path.remove(BENCHMARKS)
    # warm-up excluded: blocks alternate recorded (even) / paused (odd); a drift upwards cancels
    assert paired_ratio([10, 11, 12, 13, 14, 15, 16]) == pytest.approx(1.0)
    assert paired_ratio([10, 9, 10, 9, 10]) == pytest.approx(10 / 9)
    assert paired_ratio([10, 9]) is None


@pytest.mark.parametrize("name", ["bench_record", "bench_steps", "bench_diff", "bench_tui", "bench_cpu", "bench_live",
                                  "bench_fixes", "bench_many_groups", "bench_fr_json", "bench_stats", "bench_stages",
                                  "bench_instructions"])
def test_benchmark_scripts_run_from_a_clone(name):
    """Each benchmark is a script with --help, outside the installed package."""
    proc = subprocess.run([sys.executable, bench(name), "--help"], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(BENCHMARKS))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"benchmarks/{name}.py" in proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_bench_cpu_counts_every_variant():
    (res,) = run_json("bench_cpu", "--launches", "1", "--calls", "300")
    assert res["calls"] == 300 and res["launches"] == 1
    assert res["python"]["paths"] == ["python"] and res["plain"]["paths"] == []
    assert res["compiled"]["paths"] in (["compiled"], ["python"])  # compiled when built here
    assert all(res[v]["cpu_us"] > 0 and res[v]["wall_us"] > 0 for v in ("plain", "compiled", "python"))


@pytest.mark.timeout(120)
def test_bench_read_reads_a_log_with_both_loops_to_the_same_scan(tmp_path):
    proc = subprocess.run([sys.executable, bench("bench_read"), "--events", "3000", "--dir", str(tmp_path), "--repeat", "1"],
                          capture_output=True, text=True, timeout=100)
    if proc.returncode == 1 and "no compiled loop" in proc.stdout:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "scans equal: True" in proc.stdout and "python / compiled" in proc.stdout, proc.stdout


def test_bench_instructions_reads_every_event_of_a_thread_dump(tmp_path):
    """A callgrind dump's events are read by name (with the cache simulation: Ir then the misses),
    from the period's summary, not the totals that also count open calls."""
    sys.path.insert(0, BENCHMARKS)
    try:
        from bench_instructions import _misses, _thread_events
    finally:
        sys.path.remove(BENCHMARKS)
    dump = tmp_path / "callgrind.record.1-01"
    dump.write_text("version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nfn=(1) kernel\n0 5 1 1 1 1 0 0 0 0\n"
                    "fn=(2) watch\nsummary: 5000 900 400 30 20 10 1 2 3\ntotals: 9000 0 0 0 0 0 0 0 0\n")
    events, fns = _thread_events(str(dump))
    assert events == {"Ir": 5000, "Dr": 900, "Dw": 400, "I1mr": 30, "D1mr": 20, "D1mw": 10, "ILmr": 1, "DLmr": 2,
                      "DLmw": 3}
    assert fns == {"1", "2"}
    assert _misses(events, 10, "1") == 6.0 and _misses(events, 10, "L") == 0.6
    dump.write_text("events: Ir\nfn=(1) kernel\nsummary: 700\n")  # without the simulation: instructions alone
    assert _thread_events(str(dump))[0] == {"Ir": 700}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("callgrind_control") is None,
                    reason="needs valgrind (callgrind_control) on PATH")
def test_bench_instructions_counts_instructions_and_simulated_misses(fastpath_env, monkeypatch):
    """Every variant under callgrind with its cache simulation, at toy size: each counted its
    instructions and missed lines; torch's Flight Recorder, on in plain, writes a new entry of its
    ring each call (a last-level miss the variant with it off does not have)."""
    for key, value in fastpath_env.items():
        monkeypatch.setenv(key, value)
    proc = subprocess.run([sys.executable, bench("bench_instructions"), "--calls", "40", "--cache-sim", "--json"],
                          capture_output=True, text=True, timeout=880)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res,) = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert res["calls"] == 40 and res["paths"]["record"] in ("compiled", "python")
    assert all(res["instructions"][v] > 1000 for v in ("plain", "nofr", "record"))
    misses = res["misses"]
    assert all(misses[v]["L1"] > 0 for v in ("plain", "nofr", "record"))
    assert misses["plain"]["LL"] > misses["nofr"]["LL"] + 1
