"""benchmarks/bench_lint_corpus.py: `--lint` turns the real CLI's JSON into each program's verdict
(a buggy program found at its expected lines or missed, a correct one quiet, a finding on a correct
one a false alarm); `--run` (-m slow) confirms every corpus program's truth on 2 gloo ranks: the
correct ones exit 0, the buggy ones fail the way a collective mismatch does. What lint must find
on each program is checked in-process by tests/unit/lint/test_lint_corpus.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "bench_lint_corpus.py")


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_lint_corpus", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lint_mode_gives_each_program_its_verdict(tmp_path, capsys):
    bench = load_bench()
    out = tmp_path / "lint.json"
    names = ("bug_rank0_all_reduce.py", "bug_p2p_both_send_first.py", "ok_leaders_group.py")
    assert bench.main(["--lint", "--json", str(out), *(f"--only={n}" for n in names)]) == 0
    results = {r["name"]: r for r in json.loads(out.read_text())["lint"]}
    assert sorted(results) == sorted(names)
    assert results["bug_rank0_all_reduce.py"]["verdict"] == "found"
    assert results["bug_p2p_both_send_first.py"]["verdict"] == "found"  # a finding at the call with no condition
    assert results["ok_leaders_group.py"]["verdict"] == "quiet"
    printed = capsys.readouterr().out
    assert "buggy programs: 2, found at the expected lines: 2 (recall 100%), missed: 0" in printed
    # the buggy program's real finding, read as if the program were a correct one: a false alarm
    manifest = bench.manifest()
    assert bench.verdict({**manifest["bug_rank0_all_reduce.py"], "truth": "correct"},
                         results["bug_rank0_all_reduce.py"]["findings"]) == ("FALSE ALARM (1 error)", False)
    # and expected at another line: missed, its finding an extra error
    moved = [{**e, "call": e["call"] + 1} for e in manifest["bug_rank0_all_reduce.py"]["expect"]]
    assert bench.verdict({**manifest["bug_rank0_all_reduce.py"], "expect": moved},
                         results["bug_rank0_all_reduce.py"]["findings"]) == ("MISSED, 1 extra error(s)", False)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_corpus_program_confirms_its_truth_on_gloo(tmp_path):
    out = tmp_path / "run.json"
    proc = subprocess.run([sys.executable, SCRIPT, "--run", "--jobs", "2", "--json", str(out)], check=False,
                          capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    results = json.loads(out.read_text())["run"]
    assert len(results) == len(load_bench().manifest()) and all(r["confirmed"] for r in results)
