"""The benchmarks (benchmarks/, scripts beside the package) run end to end at toy sizes (their
figures are in docs/benchmarks.md; speed is never asserted here: these machines are too noisy for
timed tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def bench(name: str) -> str:
    return os.path.join(BENCHMARKS, f"{name}.py")


def run_json(name: str, *args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, bench(name), *args, "--json"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.timeout(300)
def test_bench_tui_previews_then_scrolls():
    (res,) = run_json("bench_tui", "--ranks", "16", "--events", "400", "--pages", "3",
                      "--preview-bytes", "0", "--preview-events", "1600")
    assert res["preview"] == 100 and res["rows"] == 400 and res["columns"] == 1
    assert 0 < res["first_screen_s"] <= res["full_s"] and res["scroll_pages"] == 3
    assert res["last_row"] > 0


@pytest.mark.timeout(300)
def test_bench_diff_reports_throughput():
    results = run_json("bench_diff", "--ranks", "8", "--events", "500")
    assert results and results[-1]["ranks"] == 8


@pytest.mark.timeout(300)
def test_bench_record_measures_both_recording_paths(fastpath_env, monkeypatch):
    """All four sections at toy sizes: micro (on the compiled path, since it is built), the 2-rank
    DDP launches, and the world-size-1 DDP ratio on both paths side by side."""
    for key, value in fastpath_env.items():
        monkeypatch.setenv(key, value)
    proc = subprocess.run([sys.executable, bench("bench_record"), "--rounds", "2", "--calls", "100",
                           "--pairs", "1", "--steps", "20", "--ddp1-pairs", "1", "--ddp1-steps", "30", "--json"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout[proc.stdout.rindex("\n{") + 1:])  # the report, then its figures as JSON
    micro = res["micro"]
    assert micro["path"] == "compiled" and micro["log_colls"] > 0 and micro["log_bytes"] > 0
    assert all(micro["median_us"][v] > 0 for v in ("plain", "paused", "record", "detail"))
    assert res["ddp"]["log_colls"] > 0 and all(res["ddp"]["step_ms"][v] for v in ("plain", "record", "paused"))
    for path in ("python", "compiled"):
        (launch,) = res["ddp1"][path]
        assert launch["ratio"] > 0 and launch["colls_per_step"] >= 2  # DDP's bucket all-reduce + join flag


@pytest.mark.parametrize("name", ["bench_record", "bench_diff", "bench_tui"])
def test_benchmark_scripts_run_from_a_clone(name):
    """Each benchmark is a script with --help, outside the installed package."""
    proc = subprocess.run([sys.executable, bench(name), "--help"], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(BENCHMARKS))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"benchmarks/{name}.py" in proc.stdout


@pytest.mark.timeout(300)
def test_bench_cpu_counts_every_variant():
    (res,) = run_json("bench_cpu", "--launches", "1", "--calls", "300")
    assert res["calls"] == 300 and res["launches"] == 1
    assert res["python"]["paths"] == ["python"] and res["plain"]["paths"] == []
    assert res["compiled"]["paths"] in (["compiled"], ["python"])  # compiled when built here
    assert all(res[v]["cpu_us"] > 0 and res[v]["wall_us"] > 0 for v in ("plain", "compiled", "python"))
