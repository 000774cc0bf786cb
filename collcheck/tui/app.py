"""`collcheck tui RUN_DIR`: the Textual app (overview, timelines, detail, wait-for, step mode)."""

from __future__ import annotations

import os

from rich.console import Group as RichGroup
from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import ContentSwitcher, Footer, Label, LoadingIndicator, Static

from ..base.untrusted import one_line, visible
from ..inputs.discover import Source, discover
from ..model import group_label, rank_ranges
from ..report import MESSAGE_CHARS
from . import navigation
from .grid import Grid
from .loading import Loading
from .messages import CursorMoved, StatsReady
from .navigation import MERGED
from .plain import summary_facts
from .screens.prompts import GroupScreen, HelpScreen, PromptScreen
from .widgets import panes
from .widgets.timeline import Timeline


class CollcheckApp(Loading, App):
    """Browse one recorded run: where each rank stopped, which ranks disagree, and how."""

    CSS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "app.tcss")  # absolute: subclasses work
    TITLE = "collcheck"
    BINDINGS = [
        Binding("o", "view('overview')", "overview"),
        Binding("t", "view('timelines')", "timelines"),
        Binding("w", "view('waitfor')", "wait-for"),
        Binding("c", "view('stats')", "comm time"),
        Binding("f", "first", "first divergence"),
        Binding("n", "finding(1)", "next"),
        Binding("p", "finding(-1)", "prev"),
        Binding("g", "choose_group", "group"),
        Binding("slash", "search", "search"),
        Binding("r", "goto_rank", "rank"),
        Binding("d,enter", "toggle_detail", "detail"),
        Binding("s", "toggle_step", "step"),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit", "quit"),
    ]

    view: reactive[str] = reactive("overview")
    show_detail: reactive[bool] = reactive(False)
    step_mode: reactive[bool] = reactive(False)
    finding: reactive[int] = reactive(-1)

    # Runs bigger than this are previewed: the first PREVIEW_EVENTS collectives (all ranks
    # together) are shown within a second or two while the full logs are read and analysed.
    PREVIEW_BYTES = 32 << 20
    PREVIEW_EVENTS = 300_000
    PREVIEW_MIN = 100  # per rank
    STREAM = None  # tests: (logs read first, logs from which) for the loader's partial first screen

    def __init__(self, target: str | Source, start_view: str = "overview", loader=None,
                 preview_bytes: int | None = None, child: bool | None = None, hold: str | None = None) -> None:
        super().__init__()
        self.child = child  # read in a loader process: None, for a big run read by kinds (loading.py)
        self.hold = hold  # tests: the loader process waits after each first screen until this path exists
        self.loader_process = None
        self.loader_died: str | None = None  # the one line said when the loader process died
        self.first: dict | None = None  # the first screen's summary facts, until the run is built here
        self.first_at = 0.0
        self.partial: dict | None = None  # the first screen's part of the logs ({"read", "total"}), while partial
        self.judged_at = 0.0  # when a first screen with its verdict came (the benchmark times its paint)
        self.stage = ""  # the loading's last progress line
        self.preview_bytes = self.PREVIEW_BYTES if preview_bytes is None else preview_bytes
        self.preview = 0  # > 0 while only the first `preview` collectives of each rank are shown
        self._moved_in_preview = False
        self.source = target if isinstance(target, Source) else None  # what the path points to (found when loading)
        self.target = target.path if isinstance(target, Source) else target
        self.start_view = start_view
        self.loader = loader  # tests / benchmark: a callable returning a Report
        self.report = None
        self.grid: Grid | None = None
        self.group = MERGED
        self.error: str | None = None
        self.load_seconds = 0.0
        self.loaded_at = 0.0
        self.grids: dict[str, Grid] = {}
        self.stats = None  # collcheck.stats.summary.Stats, computed when the stats view first opens

    def compose(self) -> ComposeResult:
        yield Static("collcheck: loading ...", id="summary-line")
        with Vertical(id="loading"):
            yield LoadingIndicator()
            yield Label("reading logs ...", id="loading-stage")
        with ContentSwitcher(id="views", initial="overview"):
            with VerticalScroll(id="overview"):
                yield Static("", id="overview-text")
            with Horizontal(id="timelines"):
                with Vertical(id="timeline-pane"):
                    yield Timeline(id="timeline")
                    yield Static("", id="steps")
                with VerticalScroll(id="detail"):
                    yield Static("", id="detail-text")
            with VerticalScroll(id="waitfor"):
                yield Static("", id="waitfor-text")
            with VerticalScroll(id="stats"):
                yield Static("computing the statistics ...", id="stats-text")
        yield Static("", id="status-line")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#views").display = False
        self.load()

    # -- state -------------------------------------------------------------------------
    def _set_grid(self, grid: Grid, row: int | None = None, col: int = 0) -> None:
        self.grid = grid
        tl = self.query_one(Timeline)
        marks, culprits = navigation.marks(self.report, grid, self.finding)
        tl.set_grid(grid, marks, culprits, tl.cursor_row if row is None else row, col)
        self._summary()

    def switch_group(self, group: str) -> None:
        if group == self.group and self.grid is not None:
            return
        grid = self.grids.get(group)
        if grid is None:
            grid = self.grids[group] = Grid(self.report, None if group == MERGED else group)
        self.group = group
        self._set_grid(grid, 0, 0)

    def _summary(self) -> None:
        r = self.report
        facts = summary_facts(r) if r is not None else self.first
        if facts is None:
            return
        if r is None:  # the first screen: the group's name as the loader process said it
            g = "all groups" if self.group == MERGED else one_line(self.grid.label)
        else:
            g = "all groups" if self.group == MERGED else one_line(group_label(r.run, self.group))
        n = facts["findings"]
        f = f"finding {self.finding + 1}/{n}" if self.finding >= 0 else f"{n} findings"
        if r is None and self.partial is not None:  # (the first logs only: nothing judged yet)
            verdict = f"pending ({self.partial['read']:,} of {self.partial['total']:,} logs read)"
            f = "findings pending"
        elif self.preview:
            verdict, f = "(analysing ...)", f"preview: first {self.preview} collectives per rank"
        else:
            verdict = facts["verdict"].upper()
        if r is None:  # the first screen, while the run is built here
            f += "  |  loading the rest ..."
        running = facts["running"]
        if running:  # the logs of processes still running: what they do next is not known
            verdict += f" (SNAPSHOT: rank{'s' if len(running) > 1 else ''} {rank_ranges(running)} still running)"
        # widgets read a str as markup: what holds strings from the logs goes in as Text
        self.query_one("#summary-line", Static).update(Text(
            f"collcheck  {one_line(facts['name'])}  {facts['ranks']} {'logs' if r is None and self.partial else 'ranks'}  "
            f"verdict {verdict}  |  {self.view}  |  {g}  |  {f}  |  ? help"))

    def watch_view(self, view: str) -> None:
        self.query_one(ContentSwitcher).current = view
        if view == "timelines":
            self.query_one(Timeline).focus()
        elif view == "stats" and self.stats is None:
            self.compute_stats()
        self._summary()

    @work(thread=True, exclusive=True, group="stats")
    def compute_stats(self) -> None:
        """`collcheck stats` of the loaded run (once: the run does not change)."""
        from ..report.stats import renderables
        from ..stats.summary import compute

        stats = compute(self.report.run)
        self.post_message(StatsReady(stats, renderables(stats, title=False)))

    def on_stats_ready(self, message: StatsReady) -> None:
        self.stats = message.stats
        self.query_one("#stats-text", Static).update(RichGroup(*message.renderables))

    def watch_show_detail(self, shown: bool) -> None:
        self.query_one("#detail").set_class(shown, "shown")
        self._refresh_side()

    def watch_step_mode(self, on: bool) -> None:
        self.query_one("#steps").set_class(on, "shown")
        self.query_one(Timeline).step_mode = on
        self._refresh_side()

    def on_cursor_moved(self, message: CursorMoved) -> None:
        self._refresh_side()

    def on_key(self, event) -> None:
        # the user is looking at the preview or the first screen: do not switch views under them
        if self.preview or (self.report is None and self.first is not None):
            self._moved_in_preview = True

    def _refresh_side(self) -> None:
        g = self.grid
        if g is None or not len(g) or not g.columns:
            return
        tl = self.query_one(Timeline)
        row, col = tl.cursor_row, tl.cursor_col
        column = g.columns[col]
        if self.show_detail:
            self.query_one("#detail-text", Static).update(panes.detail(g, column.rep, row))
        if self.step_mode:
            self.query_one("#steps", Static).update(panes.steps(g, row))
        grp, k = g.slot(row)
        status = g.status(column.rep, row)
        where = g.where(column.rep, row, status)
        text = one_line(f"{column.title}  group {grp} #{k}: {status}{where}")
        if self.report is None and self.partial is not None:
            text += f"\n{one_line(self._pending_words())}"
        if self.finding >= 0 and self.report.findings:
            f = self.report.findings[self.finding]
            text += f"\n{one_line(f.title)}: {visible(f.message, MESSAGE_CHARS)}"
        self.query_one("#status-line", Static).update(Text(text))

    # -- actions -----------------------------------------------------------------------
    def action_view(self, view: str) -> None:
        if self.report is None and self.first is not None and view in ("overview", "timelines", "waitfor"):
            self.view = view  # (the first screen has these panes)
        elif self.report is None:
            self._needs_full()
        elif not (view != "timelines" and self._needs_full()):
            self.view = view

    def action_first(self) -> None:
        self.select_finding(0)

    def action_finding(self, delta: int) -> None:
        if self.report is not None and (self.preview or self.report.findings):
            self.select_finding((self.finding + delta) % len(self.report.findings))

    def select_finding(self, index: int) -> None:
        if self._needs_full():
            return
        if self.report is None or not self.report.findings:
            self.notify("no findings: the run is clean")
            return
        self.finding = index
        f = self.report.findings[index]
        group, row, rank = navigation.locate(self.report, self.group, f, self.grids, MERGED)
        self.switch_group(group)
        grid = self.grid
        row = navigation.finding_row(grid, f) if row is None else row
        col = grid.column_of(rank) if rank is not None and rank in grid.fold_of else 0
        self._set_grid(grid, row if row is not None else self.query_one(Timeline).cursor_row, col)
        self.view = "timelines"
        self._refresh_side()

    def action_choose_group(self) -> None:
        if self._needs_full():
            return
        self.push_screen(GroupScreen(navigation.group_choices(self.report, MERGED), self.group),
                         lambda g: g and self.switch_group(g))

    def action_search(self) -> None:
        if self.report is not None or not self._needs_full():
            self.push_screen(PromptScreen("search by op or call site (e.g. barrier, main.py:25, train_step)"),
                             self.search)

    def search(self, query: str) -> None:
        if not query or self.grid is None:
            return
        tl = self.query_one(Timeline)
        hit = navigation.search(self.grid, query, tl.cursor_row, tl.cursor_col)
        if hit is None:
            self.notify(f"no match for {query!r}", severity="warning", markup=False)
            return
        self.view = "timelines"
        tl.move_to(*hit)

    def action_goto_rank(self) -> None:
        if self.report is not None or not self._needs_full():
            self.push_screen(PromptScreen("go to rank"), self.goto_rank)

    def goto_rank(self, text: str) -> None:
        if not text:
            return
        try:
            rank = int(text)
        except ValueError:
            self.notify(f"not a rank: {text!r}", severity="error", markup=False)
            return
        if rank not in self.report.run.ranks:
            self.notify(f"no log for rank {rank}", severity="error")
            return
        if self.grid is None or rank not in self.grid.fold_of:
            self.switch_group(MERGED)
        self.view = "timelines"
        self.query_one(Timeline).show_rank(rank)

    def action_toggle_detail(self) -> None:
        if self.report is not None or not self._needs_full():
            self.show_detail = not self.show_detail
            if self.show_detail:
                self.view = "timelines"

    def action_toggle_step(self) -> None:
        if not self._needs_full():
            self.step_mode = not self.step_mode
            if self.step_mode:
                self.view = "timelines"

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    # -- what tests read ---------------------------------------------------------------
    def selected(self) -> tuple:
        """(column title, group, position, status) of the cursor cell."""
        tl = self.query_one(Timeline)
        col = self.grid.columns[tl.cursor_col]
        g, k = self.grid.slot(tl.cursor_row)
        return col.title, g, k, self.grid.status(col.rep, tl.cursor_row)


def run_tui(target: str | Source) -> int:
    """Run the TUI on a run directory (or a logs root: the newest run), or on what discover found
    (`collcheck tui`: one launch); 0. A run that cannot be read
    raises LogError, before the app starts or once it has (its message), for the one error path
    (`collcheck tui` runs through base/errors.run_command). A loader process that died is said
    again on stderr once the app has closed, as one line: exit code 3."""
    from ..base.errors import INTERNAL_ERROR, print_error
    from ..logfile.reader import LogError

    source = target if isinstance(target, Source) else discover(target, newest=True)
    app = CollcheckApp(source)  # (Flight Recorder dumps: converted once the app shows)
    app.run()
    if app.error is not None:
        raise LogError(app.error)
    if app.loader_died is not None:
        print_error(app.loader_died)
        return INTERNAL_ERROR
    return 0
