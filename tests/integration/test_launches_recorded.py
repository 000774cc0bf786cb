"""Real torchrun launches recorded into one folder (docs/diff.md, 'Many launches in one folder'):
`collcheck diff FOLDER` prints a line per launch and the buggy one's report, and exits 1. The
splitting and every format are tested in-process on built logs (tests/unit/cli/test_many_launches.py,
tests/unit/inputs/test_launch_split.py); this checks it on the times and names real jobs leave."""

from __future__ import annotations

import json

import pytest
from support.cli import run_cli
from support.corpus import scenario
from support.jobs import launch


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_torchrun_launches_in_one_folder(tmp_path):
    """Two launches under one run id (a CI job's fixed --rdzv-id: their logs share one run
    directory), the second with a tensor size mismatch, then a launch of its own id."""
    logs = str(tmp_path / "logs")
    runs = [launch(scenario("many_small_broadcasts"), logs, run_id="ci"),
            launch(scenario("shape_mismatch"), logs, run_id="ci"),
            launch(scenario("per_param_allreduce"), logs, run_id="nightly")]
    assert [r.rc for r in runs] == [0, 1, 0], [r.tail() for r in runs]
    res = run_cli("diff", logs, columns=200)
    lines = res.out.splitlines()
    assert res.code == 1, res.out + res.err
    assert lines[0] == f"collcheck diff: {logs}  (3 launches)"
    assert [line.split()[:3] for line in lines[1:4]] == [["CLEAN", "ci#1", "2/2"], ["ABORTED", "ci#2", "2/2"],
                                                         ["CLEAN", "nightly", "2/2"]], res.out
    assert lines[2].endswith("collectives  tensor size mismatch: group 0, #2, culprit rank 1"), lines[2]
    assert lines[4] == "3 launches: 1 with findings, 2 clean"
    assert lines[6].strip("─ ") == "launch ci#2" and res.out.count("FIRST DIVERGENCE") == 1
    items = json.loads(run_cli("diff", logs, "--format", "json").out)
    assert [(x["launch"], x["verdict"], len(x["ranks"])) for x in items] == [
        ("ci#1", "clean", 2), ("ci#2", "aborted", 2), ("nightly", "clean", 2)]
    alone = run_cli("diff", logs, "--launch", "ci#2", "--format", "json")
    assert alone.code == 1 and json.loads(alone.out)["findings"] == items[1]["findings"]
