"""The Textual TUI: Pilot tests on recorded scenarios and synthetic runs, SVG snapshots at a fixed size."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from rich.console import Console

from collcheck.synth import write_clean_run
from tui.app import CollcheckApp, run_tui
from tui.navigation import MERGED
from tui.screens.prompts import KEYS, HelpScreen
from tui.widgets.timeline import Timeline

sys.path.insert(0, os.path.dirname(__file__))
from tui_helpers import HANG_RANK, HANG_STOP, write_hang_run  # noqa: E402

SIZE = (160, 45)
SCENARIOS = ("seed004_case4", "cross_group_deadlock", "join_uneven_inputs")


@pytest.fixture(scope="session")
def recorded(scenario_run):
    """Each scenario recorded once per session (shared with the other tests), in parallel."""
    with ThreadPoolExecutor(len(SCENARIOS)) as pool:
        return dict(zip(SCENARIOS, pool.map(lambda n: scenario_run(n)[1], SCENARIOS)))


@pytest.fixture(scope="session")
def hang_dir(tmp_path_factory):
    return write_hang_run(str(tmp_path_factory.mktemp("synth") / "synth-hang"))


def plain(app, selector: str) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(app.query_one(selector).content)
    return out.getvalue()


async def wait_loaded(pilot, app):
    for _ in range(600):
        if app.report is not None or app.error is not None:
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("the run did not load")


def drive(target: str, script, size=SIZE):
    """Open the app on `target`, wait for the load, run `script(pilot, app)`."""

    async def main():
        app = CollcheckApp(target)
        async with app.run_test(size=size) as pilot:
            await wait_loaded(pilot, app)
            await script(pilot, app)
        return app

    return asyncio.run(main())


async def type_line(pilot, text: str):
    await pilot.pause()
    for ch in text:
        await pilot.press(ch if ch not in "/:._ " else {"/": "slash", ":": "colon", ".": "full_stop",
                                                        "_": "underscore", " ": "space"}[ch])
    await pilot.press("enter")
    await pilot.pause()


# -- recorded scenarios --------------------------------------------------------------------------


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
        assert "sig.op: barrier" in detail and "majority: all_reduce float32[1] SUM" in detail
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


def test_deadlock_waitfor_step_group(recorded):
    async def script(pilot, app):
        assert app.group == MERGED  # a cross-group cycle: all groups merged
        await pilot.press("w")
        text = plain(app, "#waitfor-text")
        assert "CYCLE: rank 0 (group 1) → rank 1 (group 2) → rank 2 (group 3) → rank 3 (group 4) → rank 0" in text
        assert "rank 3 wait in group 4" in text and "⟲ cycle" in text
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


# -- synthetic runs -----------------------------------------------------------------------------


def test_synthetic_hang_step_mode(hang_dir):
    async def script(pilot, app):
        assert [c.title for c in app.grid.columns] == ["ranks 0-4,6-7", f"rank {HANG_RANK}"]
        await pilot.press("f")
        assert app.selected() == (f"rank {HANG_RANK}", "0", HANG_STOP, "missing")
        await pilot.press("s")
        steps = plain(app, "#steps")
        assert f"ranks 0-4,6-7: waiting in allreduce_ #{HANG_STOP} of group 0 for ranks {HANG_RANK} (never issued it)" in steps
        assert f"rank {HANG_RANK}: exited (finished) before #{HANG_STOP}" in steps
        await pilot.press("up")
        assert "(matched)" in plain(app, "#steps")
        await pilot.press("q")

    drive(hang_dir, script)


def test_virtualized_scroll(tmp_path):
    write_clean_run(str(tmp_path), 64, 3000)

    async def script(pilot, app):
        await pilot.press("t")
        tl = app.query_one(Timeline)
        assert len(app.grid) == 3000 and [c.title for c in app.grid.columns] == ["ranks 0-63"]
        for _ in range(5):
            await pilot.press("pagedown")
        await pilot.press("e")  # one column per rank
        await pilot.press("end")
        await pilot.pause()
        assert tl.cursor_row == 2999 and len(app.grid.columns) == 64
        assert len(app.grid._events) < 400  # only what was on screen was decoded

    drive(str(tmp_path), script)


def test_unreadable_run(tmp_path, capsys):
    from collcheck.cli import main as cli_main

    missing = str(tmp_path / "nope")
    assert run_tui(missing) == 2
    tui_err = capsys.readouterr().err
    assert cli_main(["diff", missing]) == 2
    assert tui_err == capsys.readouterr().err and tui_err.startswith("collcheck: error: ")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "rank-00000.0.msgpack").write_bytes(b"garbage")
    app = CollcheckApp(str(bad))

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot, app)

    asyncio.run(main())
    assert app.return_code == 2 and "not a collcheck log" in app.error


# -- SVG snapshots (synthetic run: fixed times, pids, paths) ------------------------------------


def _snap_app(hang_dir, keys):
    app = CollcheckApp(hang_dir)

    async def before(pilot):
        await wait_loaded(pilot, app)
        for k in keys:
            await pilot.press(k)
        await app.workers.wait_for_complete()  # the stats view computes in the background
        await pilot.pause()

    return app, before


@pytest.mark.parametrize("name,keys", [("overview", []), ("first_divergence", ["f"]),
                                       ("detail", ["f", "left", "d"]), ("waitfor", ["w"]), ("stats", ["c"])],
                         ids=["overview", "first_divergence", "detail", "waitfor", "stats"])
def test_snapshot(snap_compare, hang_dir, name, keys):
    app, before = _snap_app(hang_dir, keys)
    assert snap_compare(app, run_before=before, terminal_size=SIZE)


# -- preview of a big run ------------------------------------------------------------------------


def test_big_run_shows_a_preview_while_the_full_run_loads(hang_dir):
    """Over PREVIEW_BYTES the timelines of each rank's first collectives come first; keys that
    need the whole run say so; the full analysis then replaces the grid and keeps the cursor."""
    import threading

    release = threading.Event()

    class HeldApp(CollcheckApp):
        PREVIEW_EVENTS, PREVIEW_MIN = 8 * 10, 10  # 10 collectives per rank of 8

        def _load_preview(self):
            super()._load_preview()
            release.wait(30)  # hold the full load until the test has looked at the preview

    async def main():
        app = HeldApp(hang_dir, preview_bytes=0)
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(600):
                if app.preview:
                    break
                await pilot.pause(0.05)
            assert app.preview == 10 and app.view == "timelines"
            assert len(app.grid) == 10 and app.selected() == ("ranks 0-7", "0", 0, "matched")
            assert "preview: first 10 collectives per rank" in plain(app, "#summary-line")
            assert "(analysing ...)" in plain(app, "#summary-line")
            assert all(log.partial and len(log) == 10 for log in app.report.run.ranks.values())
            await pilot.press("f")  # needs the whole run
            assert app.finding == -1 and app.view == "timelines"
            await pilot.press("down", "down", "down")
            assert app.selected()[2] == 3
            release.set()
            await wait_full(pilot, app)
            assert app.preview == 0 and app.view == "timelines"  # the user moved: view kept
            assert app.selected()[2] == 3 and len(app.grid) > 10
            assert "verdict HANG" in plain(app, "#summary-line")
            await pilot.press("f")
            assert app.finding == 0 and app.selected()[2] == HANG_STOP

    asyncio.run(main())


async def wait_full(pilot, app):
    for _ in range(600):
        if app.report is not None and not app.preview and app.load_seconds:
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("the full run did not load")


def test_preview_reads_only_the_first_collectives(hang_dir):
    from collcheck.model import load_run

    full, preview = load_run(hang_dir), load_run(hang_dir, preview=7)
    assert all(len(log) == 7 and log.partial and log.state == "finished" and not log.pending
               for log in preview.ranks.values())
    for r, log in preview.ranks.items():  # the same first events as the full load
        assert [preview.signatures[s] for s in log.sig] == [full.signatures[s] for s in full.ranks[r].sig[:7]]
    assert not any(log.partial for log in full.ranks.values())
    assert len(load_run(hang_dir, preview=1000).ranks[HANG_RANK]) == HANG_STOP  # shorter than the limit: all of it


def test_point_to_point_messages_have_rows(scenario_run):
    """unmatched_p2p: every rank receives from the wrong peer; each (src, dst) channel is a row,
    and the first finding lands on rank 0's send to rank 1, whose recv is missing."""
    _, run_dir, _ = scenario_run("unmatched_p2p")

    async def script(pilot, app):
        assert len(app.grid) == 3 and set(app.grid.channels) == {"0·0→1", "0·1→2", "0·2→1"}
        await pilot.press("f")
        assert app.selected() == ("rank 0", "0·0→1", 0, "failed")
        assert "unmatched point-to-point" in plain(app, "#status-line")
        await pilot.press("right")
        assert app.selected() == ("rank 1", "0·0→1", 0, "missing")
        await pilot.press("s")
        assert "failed in send #0 of group 0·0→1 for ranks 1 (never issued it)" in plain(app, "#steps")

    drive(run_dir, script)


def test_matched_point_to_point_pipeline_is_clean(scenario_run):
    _, run_dir, _ = scenario_run("p2p_pipeline")

    async def script(pilot, app):
        g = app.grid
        statuses = {g.status(c.rep, row) for row in range(len(g)) for c in g.columns}
        assert statuses == {"matched", "not member"}
        assert any(name.endswith("0→1") for name in g.channels) and "0" in g.groups

    drive(run_dir, script)
