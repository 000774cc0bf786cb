"""benchmarks/bench_lint.py's synthetic repository: the lint finds exactly the planted findings
(call and condition lines) and nothing in the code that must stay quiet, and the check names a
planted finding the lint misses. (The figures, at 100,000 lines and on real trees, are in docs/lint.md.)"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from collcheck.lint import lint_paths
from collcheck.report.lint import finding_dict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_lint.py")


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_lint", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report_of(*paths: str) -> dict:
    result = lint_paths(list(paths))
    return {"findings": [finding_dict(f) for f in result.findings], "files": result.files}


def test_the_lint_finds_exactly_the_planted_calls_and_the_check_names_a_miss(tmp_path):
    bench = load_bench()
    root = str(tmp_path)
    files, _, planted = bench.write_repo(root, 1)  # (the smallest: one module per plant and three more)
    assert sorted(kind for *_, kind in planted) == sorted(bench.PLANTS)
    assert all(call > cond > 0 for _, call, cond, _ in planted)
    report = report_of(os.path.join(root, "synthrepo"))
    assert report["files"] == files
    assert bench.check(report, root, planted) == ([], [])

    rel, call, cond, _ = next(p for p in planted if p[3] == "direct")  # its collective removed: a miss
    path = os.path.join(root, rel)
    with open(path) as f:
        text = f.read().split("\n")
    text[call - 1] = text[call - 1].replace("dist.all_reduce(tensor)", "tensor.add_(1)")
    with open(path, "w") as f:
        f.write("\n".join(text))
    missing, extra = bench.check(report_of(path), root, [p for p in planted if p[0] == rel])
    assert missing == [f"direct at {rel}:{call} (condition line {cond})"] and extra == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_script_times_the_lint_and_passes_on_its_planted_findings():
    planted = len(load_bench().PLANTS)
    proc = subprocess.run([sys.executable, SCRIPT, "--lines", "5000", "--repeat", "1"], check=False, capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"planted findings: {planted}/{planted} found, 0 extra" in proc.stdout
