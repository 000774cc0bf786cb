"""The shipped benchmarks run end to end at toy sizes (their figures are in docs/benchmarks.md;
speed is never asserted here: these machines are too noisy for timed tests)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_json(*args: str) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", *args, "--json"], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.timeout(300)
def test_bench_tui_previews_then_scrolls():
    (res,) = run_json("collcheck.bench_tui", "--ranks", "16", "--events", "400", "--pages", "3",
                      "--preview-bytes", "0", "--preview-events", "1600")
    assert res["preview"] == 100 and res["rows"] == 400 and res["columns"] == 1
    assert 0 < res["first_screen_s"] <= res["full_s"] and res["scroll_pages"] == 3
    assert res["last_row"] > 0


@pytest.mark.timeout(300)
def test_bench_diff_reports_throughput():
    results = run_json("collcheck.bench_diff", "--ranks", "8", "--events", "500")
    assert results and results[-1]["ranks"] == 8
