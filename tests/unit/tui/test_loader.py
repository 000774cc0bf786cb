"""The TUI's loader process (collcheck/tui/loader.py): its first screen shown while it still works,
in the report's words; the rest built from the summaries it read; bad input said as the command's
one line; its death said in one line. The messages checked in-process (serve on a real run), the
process itself in the app."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal

import pytest
from rich.console import Console
from support.synthetic_runs import HANG_RANK, write_hang_run
from support.tui import SIZE, plain, wait_first, wait_loaded

from collcheck.analysis.diff import analyse
from collcheck.logfile import wire
from collcheck.base.errors import LogError
from collcheck.inputs.discover import discover
from collcheck.model import load, load_run
from collcheck.synth import write_clean_run
from collcheck.synth.bulk import Divergence
from collcheck.tui import loader, navigation
from collcheck.tui.app import CollcheckApp
from collcheck.tui.grid import Grid
from collcheck.tui.page import PageGrid
from collcheck.tui.plain import from_plain
from collcheck.tui.widgets import panes
from collcheck.tui.widgets.timeline import Timeline


@pytest.fixture(scope="module")
def hang_dir(tmp_path_factory):
    return write_hang_run(str(tmp_path_factory.mktemp("synth") / "synth-hang"))


class Sent:
    """The process's end of the pipe, in-process: each message through logfile/wire as it would cross."""

    def __init__(self):
        self.messages = []

    def send(self, kind, payload=None):
        self.messages.append(tuple(wire.unpack(wire.pack([kind, payload]))))

    def close(self):
        pass


def _serve(directory: str) -> list:
    source = discover(directory)
    conn = Sent()
    loader.serve({"kind": source.kind, "path": source.path, "found": source.found, "logs": source.logs,
                  "headers": None, "hold": None}, conn)
    return conn.messages


def _text(renderable) -> str:
    out = Console(width=160, color_system=None, record=True, file=open(os.devnull, "w"))
    out.print(renderable)
    return out.export_text()


def test_the_first_screen_comes_first_in_plain_data_and_the_reports_words(hang_dir):
    messages = _serve(hang_dir)
    kinds = [k for k, _ in messages]
    assert kinds[-3:] == ["first", "summaries", "done"] and set(kinds[:-3]) == {"progress"}
    first = messages[-3][1]
    report = analyse(load_run(hang_dir))
    assert first["facts"]["verdict"] == report.verdict and first["facts"]["findings"] == len(report.findings)
    assert _text(from_plain(first["overview"])) == _text(panes.overview(report))
    assert _text(from_plain(first["waitfor"])) == _text(panes.waitfor(report))
    group = navigation.default_group(report, navigation.MERGED)
    grid = Grid(report, None if group == navigation.MERGED else group)
    page = PageGrid(first["page"])
    assert len(page) == min(len(grid), 256) and [c.title for c in page.columns] == [c.title for c in grid.columns]
    for row in range(len(page)):
        assert page.slot(row) == grid.slot(row)
        for col in grid.columns:
            status = grid.status(col.rep, row)
            assert page.status(col.rep, row) == status
            assert page.where(col.rep, row, status) == grid.where(col.rep, row, status)
            for width in (12, 40, None):
                assert page.cell(col.rep, row, status, width) == grid.cell(col.rep, row, status, width)
    assert page.marks == navigation.marks(report, grid, -1)[0]


def test_the_rest_is_built_from_the_summaries_sent(tmp_path):
    write_clean_run(str(tmp_path), 16, 40)
    known: dict = {}
    before = analyse(load_run(str(tmp_path), known=known))
    assert len(known) == 16 and all(tail is not None for _, tail in known.values())
    sent = loader.known_summaries(wire.unpack(wire.pack(loader.plain_summaries(known))))
    for path, (header, tail) in known.items():  # the same values, of the same types, as read
        assert sent[path][0] == header and sent[path][1].key() == tail.key() and sent[path][1] == tail
    for path in sorted(sent)[1:]:  # the ends of the logs not read in full: now from `sent` alone
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 1)

    def said(report):
        return report.verdict, [f.title for f in report.findings], len(report.run.warnings)

    assert said(analyse(load_run(str(tmp_path), known=sent))) == said(before)
    assert said(analyse(load_run(str(tmp_path)))) != said(before)  # (read here, the torn ends are seen)


def test_the_first_screen_shows_while_the_loader_process_still_works(hang_dir, tmp_path):
    """A real loader process, held after its first screen by the test's hook: the overview, the
    summary line and the timelines are up, the process has not ended; once released, the run
    built here says the same."""
    go = tmp_path / "go"
    app = CollcheckApp(hang_dir, child=True, hold=str(go))

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await wait_first(pilot, app)
            assert app.first_at and app.report is None and app.loader_process.process.poll() is None
            overview = plain(app, "#overview-text")
            await pilot.press("t")
            summary = plain(app, "#summary-line")
            assert "verdict: HANG" in overview and "verdict HANG" in summary and "loading the rest" in summary
            tl = app.query_one(Timeline)
            lines = [tl.render_line(y).text for y in range(6)]
            await pilot.press("g")  # needs the whole run: said, nothing else
            assert app.report is None and app.view == "timelines"
            go.touch()
            await wait_loaded(pilot, app)
            assert plain(app, "#overview-text") == overview
            assert plain(app, "#summary-line") == summary.replace("  |  loading the rest ...", "")
            assert [tl.render_line(y).text for y in range(6)] == lines
            assert [c.title for c in app.grid.columns] == ["ranks 0-4,6-7", f"rank {HANG_RANK}"]

    asyncio.run(main())
    assert app.error is None and app.loader_died is None


def test_the_loader_process_dying_is_said_in_one_line(hang_dir, tmp_path):
    app = CollcheckApp(hang_dir, child=True, hold=str(tmp_path / "never"))

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await wait_first(pilot, app)
            os.kill(app.loader_process.pid, signal.SIGKILL)
            for _ in range(200):
                if app.loader_died:
                    break
                await pilot.pause(0.05)
            await pilot.pause()
            assert app.loader_died == "the process loading the run died (killed by signal 9) before it was done"
            line = plain(app, "#status-line")
            assert line.strip() == f"collcheck: {app.loader_died}"
            await pilot.press("q")

    asyncio.run(main())
    assert app.error is None and app.report is None


def test_bad_input_in_the_loader_process_is_the_commands_one_line(tmp_path):
    run, other = tmp_path / "run", tmp_path / "other"
    write_clean_run(str(run), 4, 10, run_id="one")
    paths = write_clean_run(str(other), 4, 10, run_id="two")
    shutil.copy(paths[3], run / os.path.basename(paths[3]).replace("rank-00003", "rank-00009"))
    with pytest.raises(LogError) as said:
        load_run(str(run))
    app = CollcheckApp(str(run), child=True)

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await wait_loaded(pilot, app)

    asyncio.run(main())
    assert app.return_code == 2 and app.error == str(said.value) and app.loader_died is None


@pytest.mark.slow  # (a third loader process: 2 to 5 s here)
def test_quitting_while_the_loader_process_works_ends_it_and_says_no_death(hang_dir, tmp_path):
    app = CollcheckApp(hang_dir, child=True, hold=str(tmp_path / "never"))

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await wait_first(pilot, app)
            await pilot.press("q")

    asyncio.run(main())
    assert app.loader_process.process.poll() is not None  # ended with the app, not left holding
    assert app.loader_died is None and app.error is None


JUDGED = {"matched", "mismatched", "missing", "extra"}  # what a cell says only when ranks are compared


def test_a_big_run_streams_a_partial_first_screen_then_the_same_first_screen_as_before(hang_dir, monkeypatch):
    """From STREAM_FROM logs the first FIRST_LOGS are read, laid out and sent before the others
    are read: no verdict, no findings, no cell judging ranks against each other, and it says how
    many logs it stands for; then the first screen, the summaries and "done", exactly as a run
    not streamed sends them."""
    unstreamed = _serve(hang_dir)
    monkeypatch.setattr(loader, "FIRST_LOGS", 6)
    monkeypatch.setattr(loader, "STREAM_FROM", 8)
    messages = _serve(hang_dir)
    kinds = [k for k, _ in messages]
    assert kinds.count("first") == 2 and kinds[-3:] == ["first", "summaries", "done"]
    partial = messages[kinds.index("first")][1]
    assert partial["partial"] == {"read": 6, "total": 8}
    assert partial["facts"]["verdict"] is None and partial["facts"]["findings"] is None
    assert "overview" not in partial and "waitfor" not in partial  # (the panes say it is pending)
    page = PageGrid(partial["page"])
    assert [c.title for c in page.columns] == ["ranks 0-4", f"rank {HANG_RANK}"] and not page.marks
    statuses = {page.status(c.rep, row) for row in range(len(page)) for c in page.columns}
    assert not statuses & JUDGED and {"issued", "pending"} <= statuses
    # what the rest says: as if it had not been streamed (the summaries of the same logs)
    assert [m for m in messages if m[0] != "progress"][1:] == [m for m in unstreamed if m[0] != "progress"]
    full = PageGrid(messages[-3][1]["page"])
    assert "missing" in {full.status(c.rep, row) for row in range(len(full)) for c in full.columns}


def test_the_partial_first_screen_says_what_is_pending_and_is_replaced(hang_dir, tmp_path):
    """A real loader process streaming (6 of 8 logs first), held after its partial first screen:
    the summary line and the panes say how many logs are read and that the verdict is pending,
    no cell says matched; once released, the first screen and then the run built here are the
    ones an app not streaming shows, the cursor kept where it was."""
    go = tmp_path / "go"
    app = CollcheckApp(hang_dir, child=True, hold=str(go))
    app.STREAM = (6, 8)

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await wait_first(pilot, app)
            assert app.partial == {"read": 6, "total": 8} and app.report is None and not app.judged_at
            await pilot.press("t")
            summary = plain(app, "#summary-line")
            assert "verdict pending (6 of 8 logs read)" in summary and "findings pending" in summary
            assert "HANG" not in summary and "CLEAN" not in summary
            assert "the first 6 of 8 logs are read" in plain(app, "#overview-text")
            assert "verdict" in plain(app, "#status-line") and "pending" in plain(app, "#status-line")
            tl = app.query_one(Timeline)
            lines = [tl.render_line(y).text for y in range(12)]
            assert not any("✓" in line or "✗" in line for line in lines) and "ranks 0-4" in lines[0]
            await pilot.press("down", "down")
            go.touch()
            await wait_loaded(pilot, app)
            assert app.judged_at and "verdict HANG" in plain(app, "#summary-line")
            assert tl.cursor_row == 2
            assert [c.title for c in app.grid.columns] == ["ranks 0-4,6-7", f"rank {HANG_RANK}"]

    asyncio.run(main())
    assert app.error is None and app.loader_died is None


@pytest.mark.parametrize("kind", ["missing", "shape"])
def test_the_first_screen_of_ranks_built_by_kinds_is_the_first_screen_of_ranks_read_one_by_one(tmp_path, monkeypatch,
                                                                                                  kind):
    """The loader builds thousands of ranks from their kind (model RankLog.of_kind) and answers
    the analysis' questions per kind: on a run of several kinds (two subgroups) with one rank out
    of step, its first screen (verdict, findings, panes, the page's cells) is the one of the run
    read rank by rank, each log in full."""
    write_clean_run(str(tmp_path), 96, 400, groups=[list(range(k, 96, 2)) for k in range(2)],
                    diverge=Divergence(37, 150, kind))
    by_kinds = load_run(str(tmp_path))
    assert len({id(log.sig) for log in by_kinds.ranks.values()}) == 3
    first = wire.unpack(wire.pack(loader._first_screen(by_kinds)))
    monkeypatch.setattr(load, "FOLD_FROM", 1 << 30)
    one_by_one = load_run(str(tmp_path))
    assert all(log.like is None for log in one_by_one.ranks.values())
    assert first == wire.unpack(wire.pack(loader._first_screen(one_by_one)))
    report = analyse(load_run(str(tmp_path)))
    assert first["facts"]["verdict"] == report.verdict != "clean" and report.findings[0].ranks == [37]
