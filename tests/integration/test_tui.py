"""The Textual TUI on recorded scenarios (Pilot): overview, first divergence, detail with source
lines, search, wait-for graph, step mode, groups, point-to-point rows, the stats view."""

from __future__ import annotations

import pytest

from support.tui import drive, plain, type_line
from collcheck.tui.navigation import MERGED
from collcheck.tui.screens.prompts import KEYS, HelpScreen

SCENARIOS = ("seed004_case4", "cross_group_deadlock", "join_uneven_inputs")


@pytest.fixture
def recorded(corpus):
    return {n: corpus(f"scenario:{n}").run_dir for n in SCENARIOS}


# -- recorded scenarios --------------------------------------------------------------------------


@pytest.mark.recordings("scenario:seed004_case4")
def test_overview_findings_detail_search(recorded):
    async def script(pilot, app):
        text = plain(app, "#overview-text")
        assert "verdict: HANG" in text and "first finding: different collectives in the same slot" in text
        assert "timed out in a collective" in text
        await pilot.press("f")
        assert app.view == "timelines" and app.finding == 0
        assert app.selected() == ("rank 1", "0", 28, "mismatched")
        assert "issued barrier at main.py:25" in plain(app, "#status-line")
        await pilot.press("n")
        assert app.finding == 1 and app.report.findings[1].kind == "hang"
        await pilot.press("p")
        assert app.finding == 0
        await pilot.press("d")
        detail = plain(app, "#detail-text")
        assert "rank 1, group 0, collective #28: mismatched" in detail
        assert "sig.op: barrier" in detail and "in step: all_reduce float32[1] SUM" in detail
        assert "▶   25" in detail  # the call site's source line (the scenario file exists here)
        await pilot.press("d")
        assert not app.show_detail
        await pilot.press("home")
        await pilot.press("slash")
        await type_line(pilot, "main.py:25")
        assert app.selected()[2] == 6 and "at main.py:25" in plain(app, "#status-line")  # the loop's barrier
        await pilot.press("slash")
        await type_line(pilot, "broadcast")  # by op, from the cursor on
        assert app.selected()[:3] == ("rank 0", "0", 8)
        await pilot.press("r")
        await type_line(pilot, "0")
        assert app.selected()[0] == "rank 0"
        await pilot.press("right")
        assert app.selected()[0] == "rank 1"
        await pilot.press("end")
        assert app.selected()[2] == 28

    drive(recorded["seed004_case4"], script)


@pytest.mark.recordings("scenario:cross_group_deadlock")
def test_deadlock_waitfor_step_group(recorded):
    async def script(pilot, app):
        assert app.group == MERGED  # a cross-group cycle: all groups merged
        await pilot.press("w")
        text = plain(app, "#waitfor-text")
        assert "CYCLE: rank 0 (group 1) → rank 1 (group 2) → rank 2 (group 3) → rank 3 (group 4) → rank 0" in text
        assert "rank 3 waits in group 4" in text and "⟲ cycle" in text
        await pilot.press("t")
        await pilot.press("s")
        assert app.step_mode
        steps = plain(app, "#steps")
        assert "failed in allreduce_ #0 of group" in steps
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("down", "down")  # *, 0, 1 -> group 1 (after "*" and "0")
        await pilot.press("enter")
        await pilot.pause()
        assert app.group == "1" and [c.title for c in app.grid.columns] == ["rank 0", "rank 1"]
        steps = plain(app, "#steps")
        assert "rank 0: failed in allreduce_ #0 of group 1" in steps
        await pilot.press("s")
        assert not app.step_mode
        await pilot.press("r")
        await type_line(pilot, "3")  # not in group 1: back to the merged view
        assert app.group == MERGED and app.selected()[0] == "rank 3"

    drive(recorded["cross_group_deadlock"], script)


@pytest.mark.recordings("scenario:join_uneven_inputs")
def test_clean_run_and_help(recorded):
    async def script(pilot, app):
        assert app.report.verdict == "clean"
        assert "No divergence" in plain(app, "#overview-text")
        await pilot.press("f")
        assert app.finding == -1
        await pilot.press("w")
        assert "Nobody waits" in plain(app, "#waitfor-text")
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        help_text = str(app.screen.query_one("#help-text").content)
        for key, _ in KEYS:
            assert key in help_text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("c")  # the stats view: collcheck stats' tables, computed in the background
        for _ in range(200):
            if app.stats is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause()
        text = plain(app, "#stats-text")
        assert "time inside collectives, per call site" in text and "(gradient bucket)" in text, text
        assert all(f"{s.api} ({s.role})" in text for s in app.stats.sites if s.role), text
        await pilot.press("t")
        assert app.selected() == ("ranks 0-1", "0", 0, "matched")
        await pilot.press("e")
        assert [c.title for c in app.grid.columns] == ["rank 0", "rank 1"]
        await pilot.press("space")
        assert [c.title for c in app.grid.columns] == ["ranks 0-1"]

    drive(recorded["join_uneven_inputs"], script)


@pytest.mark.recordings("scenario:unmatched_p2p")
def test_point_to_point_messages_have_rows(corpus):
    """unmatched_p2p: every rank receives from the wrong peer; each (src, dst) channel is a row,
    and the first finding lands on rank 1, which never posted the recv of rank 0's send to it."""
    run_dir = corpus("scenario:unmatched_p2p").run_dir

    async def script(pilot, app):
        assert len(app.grid) == 3 and set(app.grid.channels) == {"0·0→1", "0·1→2", "0·2→1"}
        await pilot.press("f")
        assert app.selected() == ("rank 1", "0·0→1", 0, "missing")
        assert "unmatched point-to-point" in plain(app, "#status-line")
        await pilot.press("left")
        assert app.selected() == ("rank 0", "0·0→1", 0, "failed")
        await pilot.press("s")
        assert "failed in send #0 of group 0·0→1 for ranks 1 (never issued it)" in plain(app, "#steps")

    drive(run_dir, script)


@pytest.mark.recordings("scenario:p2p_pipeline")
def test_matched_point_to_point_pipeline_is_clean(corpus):
    run_dir = corpus("scenario:p2p_pipeline").run_dir

    async def script(pilot, app):
        g = app.grid
        statuses = {g.status(c.rep, row) for row in range(len(g)) for c in g.columns}
        assert statuses == {"matched", "not member"}
        assert any(name.endswith("0→1") for name in g.channels) and "0" in g.groups

    drive(run_dir, script)
