"""`collcheck lint --logs RUN`: a recorded run teaches the lint which calls issue collectives.

chains.py's normalisation layer all-gathers inside its own `forward`, which the program reaches
through `model(x)` (torch's module call, no name the lint can follow). The source alone shows the
rank-0 helper barrier; the recorded run's chains show that `model(...)` issued collectives, and
then rank 0's lone visualisation pass, `visualise(model, batch)` under `rank == 0`, is found too."""

from __future__ import annotations

import pytest
from support.cli import run_cli
from support.jobs import marker_lines, program

from collcheck.lint import lint_paths

SCRIPT = program("chains.py")


@pytest.mark.recordings("chains_extra_forward")
def test_the_recorded_chains_add_the_calls_they_show_issuing_collectives(corpus):
    marks = marker_lines(SCRIPT)
    helper = (marks["evaluate_calls"], marks["evaluate_calls"] - 1)
    alone = lint_paths([SCRIPT])
    assert {(f.line, f.branch_line) for f in alone.findings} == {helper}
    rec = corpus("chains_extra_forward")
    taught = lint_paths([SCRIPT], logs=rec.run_dir)
    got = {(f.line, f.branch_line): f for f in taught.findings}
    assert set(got) == {helper, (marks["visualise_call"], marks["visualise_call"] - 1)}, got
    visual = got[(marks["visualise_call"], marks["visualise_call"] - 1)]
    assert [line for _, line, _ in visual.chain] == [marks["visualise_call"], marks["extra_forward"]]
    assert visual.framework == "recorded run" and "`model(...)`" in visual.api
    assert taught.learned >= 2
    res = run_cli("lint", SCRIPT, "--logs", rec.run_dir, "--format", "json")
    assert res.code == 1 and '"learned_sites"' in res.out
