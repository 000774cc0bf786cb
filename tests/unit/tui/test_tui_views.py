"""The Textual TUI on synthetic runs (collcheck.synth: fixed times, pids, paths), in-process:
step mode, virtual scrolling, unreadable runs, the preview of a big run, SVG snapshots at a fixed
size."""

from __future__ import annotations

import asyncio

import pytest

from collcheck.synth import write_clean_run
from support.synthetic_runs import HANG_RANK, HANG_STOP, write_hang_run
from support.tui import SIZE, drive, plain, wait_full, wait_loaded
from collcheck.tui.app import CollcheckApp, run_tui
from collcheck.tui.widgets.timeline import MIN_COL_W, Timeline


@pytest.fixture(scope="session")
def hang_dir(tmp_path_factory):
    return write_hang_run(str(tmp_path_factory.mktemp("synth") / "synth-hang"))


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
    from collcheck.base.errors import LogError
    from collcheck.cli import main as cli_main

    missing = str(tmp_path / "nope")
    with pytest.raises(LogError):  # for the one error path, which prints it
        run_tui(missing)
    assert cli_main(["tui", missing]) == 2
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


def test_preview_reads_only_the_first_collectives(hang_dir):
    from collcheck.model import load_run

    full, preview = load_run(hang_dir), load_run(hang_dir, preview=7)
    assert all(len(log) == 7 and log.partial and log.state == "finished" and not log.pending
               for log in preview.ranks.values())
    for r, log in preview.ranks.items():  # the same first events as the full load
        assert [preview.signatures[s] for s in log.sig] == [full.signatures[s] for s in full.ranks[r].sig[:7]]
    assert not any(log.partial for log in full.ranks.values())
    assert len(load_run(hang_dir, preview=1000).ranks[HANG_RANK]) == HANG_STOP  # shorter than the limit: all of it


# -- column widths -------------------------------------------------------------------------------

LONG_LABELS = ("FSDP2 forward: FSDP unshard all-gather of model.layers.11.experts.1",
               "DTensor.full_tensor(): Shard(1) -> Replicate() over the tp mesh dim")
SHORT_LABELS = ("FSDP2 forward: FSDP unshard all-gather of experts.1",
                "DTensor.full_tensor(): Shard(1) -> Replicate() over tp")
LONG_FILE = "/home/someone/projects/a-rather-long-project-name/src/deeply/nested/package/train.py"


def _long_label_run(directory, monkeypatch, world: int):
    """`world` ranks, each issuing a long-labelled all-gather then a shorter-labelled one at
    train.py:43 (a long path); rank 1 labels both differently (a mismatch: a column of its own)."""
    from support import runs

    monkeypatch.setattr(runs, "FILE", LONG_FILE)
    by_rank = {r: [runs.Call("allgather_into_tensor_coalesced", line=1234, role=LONG_LABELS[r == 1]),
                   runs.Call("allgather_into_tensor_coalesced", line=43, role=SHORT_LABELS[r == 1])]
               for r in range(world)}
    runs.write(str(directory), {"0": tuple(range(world))}, by_rank)
    return str(directory)


def _cells(tl: Timeline, y: int) -> list[str]:
    """The visible cells of screen line `y` of the timeline (gutter left out)."""
    return [c.strip() for c in tl.render_line(y).text.split("│")[1:-1]]


def test_rank_columns_share_the_terminal_width(tmp_path, monkeypatch):
    """Two ranks in 160 columns show whole labels and call sites (not cut at a fixed column width);
    80 columns and 16 ranks still render, the columns at their minimum width."""
    two = _long_label_run(tmp_path / "two", monkeypatch, 2)

    async def wide(pilot, app):
        tl = app.query_one(Timeline)
        await pilot.press("t")
        assert [c.title for c in app.grid.columns] == ["rank 0", "rank 1"]
        long_row, short_row = _cells(tl, 1), _cells(tl, 2)
        for label, cell in zip(LONG_LABELS, long_row):
            assert label in cell, f"label cut: {cell!r}"
        for label, cell in zip(SHORT_LABELS, short_row):
            assert label in cell and "train.py:43" in cell and LONG_FILE not in cell, f"label or site cut: {cell!r}"
        await pilot.resize_terminal(80, 40)  # recomputed on resize: one column's share, cut with "…"
        await pilot.pause()
        cells = _cells(tl, 1)
        assert len(cells) == 2 and all(c.endswith("…") for c in cells), cells

    drive(two, wide, size=(160, 40))
    drive(two, lambda pilot, app: pilot.press("t"), size=(80, 40))

    many = _long_label_run(tmp_path / "many", monkeypatch, 16)

    async def sixteen(pilot, app):
        tl = app.query_one(Timeline)
        await pilot.press("t")
        await pilot.press("e")  # ranks 0,2-15 (rank 1 differs) unfolded: 16 columns, scrolled horizontally
        assert len(app.grid.columns) == 16 and tl.col_w == MIN_COL_W
        for _ in range(15):
            await pilot.press("right")
        await pilot.pause()
        assert tl.cursor_col == 15 and tl.scroll_offset.x > 0
        assert _cells(tl, 0)[-1] == app.grid.columns[15].title == "rank 1"

    drive(many, sixteen, size=(160, 40))
