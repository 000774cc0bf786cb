"""How the app gets its run: read and analysed in a worker thread, or for a big run read by kinds
in a loader process of its own (loader.py) whose first screen is shown while the rest is built.

What the first screen, the preview and the whole run show is worded by the same functions
(widgets/panes.py, cells.py): whichever arrives, the words are the report's."""

from __future__ import annotations

import gc
import os
import time

from rich.text import Text
from textual import work
from textual.widgets import Label, Static

from ..base import collector
from ..base.untrusted import one_line
from ..inputs.discover import discover
from ..model import reads_by_kinds
from . import navigation
from .grid import Grid
from .loader import LoaderDied, LoaderProcess, known_summaries
from .messages import (
    FirstScreen,
    Loaded,
    LoaderGone,
    LoadFailed,
    LoadProgress,
    Previewed,
)
from .navigation import MERGED
from .page import PageGrid
from .plain import from_plain
from .widgets import panes
from .widgets.timeline import Timeline

CHILD_FROM = 16384  # logs read by kinds from which the run is read in a loader process (below, on two
# busy cores, the app's own thread was as fast: docs/benchmarks.md)


class Loading:
    """The CollcheckApp's loading: the worker, the loader process and the messages they post."""

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        from ..logfile.reader import LogError

        t0 = time.perf_counter()
        try:
            with collector.paused():  # (the run's objects live until exit: on_loaded freezes them)
                loaded = self._load()
        except LogError as exc:
            self.post_message(LoadFailed(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - shown like the CLI's internal error
            self.post_message(LoadFailed(f"internal error: {type(exc).__name__}: {exc}"))
            return
        if loaded is not None:  # (None: the loader process said why, or died)
            report, group, grid = loaded
            self.post_message(Loaded(report, grid, group, time.perf_counter() - t0))

    def _load(self) -> tuple | None:
        """(report, the group shown first, its grid); None when the loader process failed."""
        if self.loader is not None:
            report = self.loader()
        else:
            if self.source is None:
                self.source = discover(self.target)
            known = self._from_child() if self._use_child() else None  # (before the imports: it starts sooner)
            if known is False:
                return None
            from ..analysis.diff import analyse
            from ..model import load_run

            run = self._load_preview() if known is None else None  # the whole run when the preview read all of it
            if run is None:
                self.post_message(LoadProgress(f"reading the logs of {self.target} ..."))
                run = load_run(self.source, known=known)
            self.post_message(LoadProgress(f"analysing {len(run.ranks)} ranks ..."))
            report = analyse(run)
        group = navigation.default_group(report, MERGED)
        self.post_message(LoadProgress("laying out the timelines ..."))
        return report, group, Grid(report, None if group == MERGED else group)

    def _use_child(self) -> bool:
        """Whether a loader process reads the run: asked (`child`), else a big run read by kinds."""
        if self.child is not None:
            return self.child
        paths = self.source.logs  # (the pipe is watched with select: POSIX only)
        return os.name == "posix" and len(paths) >= CHILD_FROM and reads_by_kinds(paths)

    def _from_child(self):
        """Run the loader process: its progress and first screen posted as they come; the logs'
        summaries it read (load_run's `known`), or False when it failed or died (posted)."""
        child = self.loader_process = LoaderProcess(self.source, self.hold, self.STREAM)
        known = None
        from ..analysis.diff import analyse  # noqa: F401 - imported while the process reads, not after:
        from ..model import load_run  # noqa: F401 - an import would hold the interface's keys then
        try:
            for kind, payload in child.messages():
                if kind == "progress":
                    self.post_message(LoadProgress(str(payload)))
                elif kind == "first":
                    self.post_message(FirstScreen(payload))
                elif kind == "summaries":
                    known = known if known is not None else {}
                    known.update(known_summaries(payload))
                elif kind == "error":
                    self.post_message(LoadFailed(str(payload)))
                    return False
        except LoaderDied as exc:
            if not child.closed:  # (closed: the app quit, and ended it)
                self.post_message(LoaderGone(str(exc)))
            return False
        finally:
            child.close()
        return known

    def _load_preview(self):
        """For a big run, post the timelines of each rank's first collectives first.

        Returns the run when the preview turned out to hold every collective, else None."""
        from ..analysis.diff import analyse
        from ..model import load_run

        paths = self.source.logs  # (Flight Recorder dumps: converted now, once)
        if sum(os.path.getsize(p) for p in paths) <= self.preview_bytes or reads_by_kinds(paths):
            return None  # (ranks of a few kinds: the whole run reads about as fast as a preview)
        per_rank = max(self.PREVIEW_MIN, self.PREVIEW_EVENTS // len(paths))
        self.post_message(LoadProgress(f"reading the first {per_rank} collectives of {len(paths)} ranks ..."))
        run = load_run(self.source, preview=per_rank)
        if not any(log.partial for log in run.ranks.values()):
            return run
        report = analyse(run)
        group = navigation.default_group(report, MERGED)
        self.post_message(Previewed(report, Grid(report, None if group == MERGED else group), group, per_rank))

    def _show_views(self) -> None:
        self.query_one("#loading").display = False
        self.query_one("#views").display = True

    def on_first_screen(self, message: FirstScreen) -> None:
        """The loader process's first screen: panes and the timelines' first page, until the run
        is built here. A partial one (the first logs only) comes first for a big run: no verdict,
        no findings, the panes say what is still read; the whole run's first screen replaces it
        (the cursor kept where the rows allow)."""
        if self.report is not None:  # (a preview, or the whole run, is shown already)
            return
        data = message.payload
        again = self.first is not None
        self.first, self.partial = data["facts"], data.get("partial")
        self.first_at = self.first_at or time.perf_counter()  # the benchmark times the paint after this
        if self.partial is None:
            self.judged_at = time.perf_counter()  # (and after this: the first screen with its verdict)
        self._show_views()
        if self.partial is None:
            self.query_one("#overview-text", Static).update(from_plain(data["overview"]))
            self.query_one("#waitfor-text", Static).update(from_plain(data["waitfor"]))
        else:
            for pane in ("#overview-text", "#waitfor-text"):
                self.query_one(pane, Static).update(Text(self._pending_words()))
        grid = PageGrid(data["page"])
        self.group = grid.group if grid.group is not None else MERGED
        self.grid = grid
        tl = self.query_one(Timeline)
        row, col = (min(tl.cursor_row, max(len(grid) - 1, 0)), min(tl.cursor_col, max(len(grid.columns) - 1, 0))) \
            if again else (0, 0)
        tl.set_grid(grid, grid.marks, grid.culprits, row, col)
        self._summary()
        self.query_one("#status-line", Static).update(Text(
            f"the first {len(grid)} of {grid.total_rows} rows; {self._pending_words()}"))
        if not again:
            self.view = self.start_view
            tl.focus()

    def _pending_words(self) -> str:
        """What is still being done while a first screen is shown, in words."""
        part = self.partial
        if part is None:
            return "building the whole run here ..."
        return (f"the first {part['read']:,} of {part['total']:,} logs are read, the others are being read "
                f"({one_line(self.stage)}); the verdict and the findings are pending, cells say what each rank "
                "issued, not yet whether the ranks agree")

    def on_previewed(self, message: Previewed) -> None:
        if self.report is not None:  # the full load won the race
            return
        self.report, self.preview = message.report, message.per_rank
        self.grids = {message.group: message.grid}
        self.group = message.group
        self._show_views()
        self._set_grid(message.grid)
        self.view = "timelines"
        self.query_one(Timeline).focus()
        self.query_one("#status-line", Static).update(
            f"preview: the first {self.preview} collectives of each rank; reading and analysing the full logs ...")

    def _needs_full(self) -> bool:
        """True (and says so) while only the preview or the first screen is shown."""
        if self.preview:
            self.notify("still reading the full logs: findings, groups, step mode and the overview come when "
                        "they are analysed", severity="warning")
        elif self.report is None:
            self.notify("still building the run: findings, groups, step mode, search and the detail come when "
                        "it is built", severity="warning")
        return bool(self.preview) or self.report is None

    def on_load_progress(self, message: LoadProgress) -> None:
        self.stage = message.stage
        self.query_one("#loading-stage", Label).update(Text(one_line(message.stage)))  # names a path: data
        if self.report is None and self.partial is not None:  # (how many logs are still read, said)
            for pane in ("#overview-text", "#waitfor-text"):
                self.query_one(pane, Static).update(Text(self._pending_words()))
            self._refresh_side()

    def on_load_failed(self, message: LoadFailed) -> None:
        self.error = message.error
        self.exit(return_code=2)

    def on_loader_gone(self, message: LoaderGone) -> None:
        """The loader process died: one line, where the user is looking."""
        self.loader_died = message.error
        line = Text(one_line(f"collcheck: {message.error}"), style="bold red")
        self.query_one("#loading-stage", Label).update(line)
        self.query_one("#status-line", Static).update(line)

    def on_unmount(self) -> None:
        if self.loader_process is not None:
            self.loader_process.close()

    def on_loaded(self, message: Loaded) -> None:
        was_partial, self.preview = bool(self.preview) or self.first is not None, 0
        self.report, self.load_seconds = message.report, message.seconds
        self.loaded_at = time.perf_counter()  # the benchmark times the paint after this
        gc.collect()
        gc.freeze()  # the run's millions of objects live until exit: keep them out of gen-2 pauses
        self._show_views()
        self.query_one("#overview-text", Static).update(panes.overview(self.report))
        self.query_one("#waitfor-text", Static).update(panes.waitfor(self.report))
        self.grids = {message.group: message.grid}
        same_rows = was_partial and message.group == self.group
        self.group = message.group
        tl = self.query_one(Timeline)
        if same_rows:  # same rows (aligned collectives) as the preview's or first screen's: keep the cursor
            col = tl.cursor_col if self.first is not None else 0  # (the first screen's columns are the grid's)
            self._set_grid(message.grid, min(tl.cursor_row, max(len(message.grid) - 1, 0)), col)
            self.query_one("#status-line", Static).update("")
            self._refresh_side()
            if self._moved_in_preview:
                self.notify(f"full run analysed: verdict {self.report.verdict.upper()} (f: first divergence)")
                return
        else:
            self._set_grid(message.grid)
        self.view = self.start_view
        tl.focus()
