"""Reports speak the framework that issued a collective: FSDP2's collectives are FSDP2's, with
FSDP's fix, never DDP's or join()'s (labels on both recording paths: test_recorder.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import diff_json, marker_lines, program, torchrun
from test_reports import assert_rows_line_up

from collcheck.analysis.diff import analyse
from collcheck.model import load_run


@pytest.mark.timeout(150)
def test_fsdp2_expert_skipped_on_one_rank_is_reported_in_fsdp_terms(tmp_path):
    rc, _, err, run_dir = torchrun(program("fsdp_skip.py"), 2, tmp_path, timeout=120)
    assert rc != 0, err[-2000:]  # the skipped expert hangs the job until gloo's timeout
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    # step 2's forward: 1 root-less model, 3 experts -> rank 0 gathers experts.1 where rank 1,
    # which skipped it, gathers experts.2: same shape, different module, the rank that skipped blamed
    # (step 1: 3 forward all-gathers, 3 backward all-gathers, 3 reduce-scatters; step 2: experts.0 at #9)
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("semantic_mismatch", "0", 10, [1])
    roles = {r: e["role"] for r, e in first["events"].items()}
    assert roles == {"0": "FSDP unshard all-gather of experts.1", "1": "FSDP unshard all-gather of experts.2"}, roles
    assert all(e["label"].startswith("FSDP2 forward: ") for e in first["events"].values()), first["events"]
    assert "experts.1" in first["message"] and "experts.2" in first["message"], first["message"]
    assert first["fix"].startswith("every rank must run the same FSDP modules"), first["fix"]
    text = subprocess.run([sys.executable, "-m", "collcheck.cli", "diff", run_dir], capture_output=True, text=True, check=False,
                          timeout=120).stdout
    assert "FSDP2 forward" in text and "DDP" not in text and "join()" not in text, text


@pytest.mark.timeout(150)
def test_rank_only_full_tensor_on_a_2d_mesh_blames_that_rank_at_its_slot(tmp_path):
    """Rank 0 all-gathers on its tp group while ranks 1-3 wait in a world barrier: a wait-for
    cycle through rank 1, but rank 0 is the one out of step (every other rank waits on it). The
    finding names rank 0 alone, at its own slot (#3 of its tp group, by mesh dimension), and the
    table shows that slot."""
    script = program("mesh_rank0_full_tensor.py")
    marks = marker_lines(script)
    rc, _, err, run_dir = torchrun(script, 4, tmp_path, timeout=120)
    assert rc != 0, err[-2000:]
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    assert (first["kind"], first["ranks"], first["position"]) == ("deadlock", [0], 3), first
    assert first["group_label"] == f"group {first['group']} (mesh tp [0, 1] at dp=0)", first["group_label"]
    assert first["events"]["0"]["site"]["line"] == marks["full_tensor"], first["events"]["0"]
    assert first["details"]["waited_on_by"] == {"0": [1, 2, 3]}, first["details"]
    assert first["fix"].startswith("rank 0 issued a collective the other members"), first["fix"]
    text = subprocess.run([sys.executable, "-m", "collcheck.cli", "diff", run_dir], capture_output=True, text=True, check=False,
                          timeout=120, env=dict(os.environ, COLUMNS="200")).stdout
    assert f"{first['group_label']}: collectives around #3" in text, text
    assert_rows_line_up(analyse(load_run(run_dir)))  # every table row: one slot on every rank
