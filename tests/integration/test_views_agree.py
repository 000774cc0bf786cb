"""The report and the TUI say the same thing: on every scenario and every bug program of the tests,
the TUI marks as wrong exactly the cells of the ranks the report blames, at the slot it blames them
(analysis/verdicts.py), and a blamed event's site, its call chain and every rank's final state are
the same strings in the text report and in the TUI (report/words.py).

The cells are checked on the TUI's view-model (every rank's own column, every row of the merged
view); a Pilot drives the app itself through the findings of the runs the default run records.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from support.corpus import (
    BLAME_PROGRAMS,
    FRAMEWORK_CASES,
    scenario_meta,
    scenario_names,
)
from support.tui import drive, plain

from collcheck.analysis.diff import analyse
from collcheck.model import load_run
from collcheck.report import words
from collcheck.report.text import render
from collcheck.tui.grid import Grid, finding_row
from collcheck.tui.widgets import panes
from collcheck.tui.widgets.timeline import cell_text

WRONG = ("mismatched", "missing", "extra")
HANGS = ("hang", "deadlock")
BUG_PROGRAMS = (
    [f"scenario:{n}" for n in scenario_names() if not scenario_meta(n)["valid"]]
    + ["fsdp_skip", "mesh_rank0_full_tensor", "tp_branch", "fsdp_tp_rank0_full_tensor", "dcp_rank0",
       "pipeline_ragged", "tp_world_allreduce", "fsdp2_skip_backward", "chains_extra_forward",
       "chains_helper_barrier", "p2p_then_missing", "batch_ring"]
    + [f"fw_{fw}_{case}" for fw, cases in FRAMEWORK_CASES.items() if fw != "deepspeed" for case in cases
       if case != "ok"]
    + [f"blame_{case}" for case in BLAME_PROGRAMS])
# recorded by the default run for other tests already; the rest: -m slow
DEFAULT_RUN = {"scenario:seed004_case4", "scenario:unmatched_p2p", "scenario:cross_group_deadlock",
               "scenario:op_mismatch", "fsdp_skip", "blame_helper", "chains_extra_forward", "batch_ring"}
PILOT = {"blame_helper"}  # the app driven by default; the others: -m slow
WIDE = 400


def cases(names):
    return [pytest.param(n, marks=[pytest.mark.recordings(n)] + ([] if n in DEFAULT_RUN else [pytest.mark.slow]), id=n)
            for n in names]


def _analysed(corpus, name):
    launch = corpus(name)
    return launch.run_dir, analyse(load_run(launch.run_dir))


def _unfolded(report) -> Grid:
    """The merged view with every rank in a column of its own."""
    grid = Grid(report, None)
    grid.expanded = set(range(len(grid.folds)))
    grid._layout_columns()
    return grid


def _blamed_cells(report, grid) -> set:
    """(rank, row) of every cell the report blames: each finding's ranks at its slot (members of
    its group); a hang's only where the rank never issued the call (the others wait in theirs:
    pending, not wrong)."""
    out = set()
    for f in report.findings:
        row = finding_row(grid, f)
        if row is None:
            continue
        group = grid.slot(row)[0]
        for r in f.ranks:
            member = r in grid.seqs and (group in grid.seqs[r].idx or grid.is_member(r, group))
            if member and (f.kind not in HANGS or grid.index(r, row) is None):
                out.add((r, row))
    return out


def _text_report(report) -> str:
    out = io.StringIO()
    render(report, out)
    return out.getvalue()


def _shown(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=WIDE, color_system=None, legacy_windows=False).print(renderable)
    return out.getvalue()


@pytest.mark.parametrize("name", cases(BUG_PROGRAMS))
def test_the_tui_marks_exactly_the_cells_the_report_blames(corpus, name, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDE))  # no line of the report wrapped
    _, report = _analysed(corpus, name)
    assert report.findings, f"{name}: no finding"
    grid = _unfolded(report)
    wrong = {(r, row) for row in range(len(grid)) for r in grid.ranks if grid.status(r, row) in WRONG}
    assert wrong == _blamed_cells(report, grid), sorted(wrong ^ _blamed_cells(report, grid))[:8]
    folded = Grid(report, None)  # folded columns never hold a blamed rank beside one that is not
    for f in report.findings:
        row = finding_row(folded, f)
        for column in folded.columns if row is not None else ():
            assert len({folded.status(r, row) for r in column.ranks}) == 1, (f.kind, column.title)

    text = _text_report(report)
    for f in report.findings:
        row = finding_row(grid, f)
        for r in f.ranks:
            ev = f.events.get(r)
            if ev is None or row is None or grid.index(r, row) != ev.index:  # (its cell shows another call)
                continue
            site = words.event_site(ev)
            assert site in text, (r, site)
            assert site in cell_text(grid.event(r, row), grid.status(r, row)), (r, site)
            if ev.chain and len(ev.chain) > 1:
                detail = _shown(panes.detail(grid, r, row, chain_width=WIDE - 12))  # the report's width
                for line in words.chain_words(ev, WIDE - 12):
                    assert line in text and line in detail, (r, line)
    overview = _shown(panes.overview(report))
    for state in words.final_states(report, most=64) if "final state" in text else ():  # (a hang's table)
        assert state.state in text and state.state in overview, state
        assert (state.blocked in text and state.blocked in overview) if state.blocked else True, state


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.recordings(n)] + [pytest.mark.slow] * (n not in PILOT),
                                               id=n) for n in sorted(DEFAULT_RUN)])
def test_the_app_lands_on_the_blamed_ranks_of_every_finding(corpus, name):
    """In the app: 'f' and 'n' walk the findings; each lands on a column of blamed ranks whose
    cell is marked wrong (or, in a hang, a rank that waits there), the status line naming its site."""
    run_dir, report = _analysed(corpus, name)

    async def script(pilot, app):
        for k, f in enumerate(app.report.findings[:6]):
            await pilot.press("f" if k == 0 else "n")
            if app.finding != k or finding_row(app.grid, f) is None:
                continue
            title, _, _, status = app.selected()
            column = app.grid.columns[app.query_one("#timeline").cursor_col]
            assert set(column.ranks) <= set(f.ranks), (f.kind, title, f.ranks)
            assert status in WRONG or f.kind in HANGS, (f.kind, title, status)
            ev = f.events.get(column.rep)
            if ev is not None and ev.site and status != "missing":
                assert words.event_site(ev) in plain(app, "#status-line"), (f.kind, title)

    drive(run_dir, script)
