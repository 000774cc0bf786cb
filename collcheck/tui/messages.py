"""Messages posted by the loader worker and the widgets back to the app."""

from __future__ import annotations

from textual.message import Message


class LoadProgress(Message):
    """The loader moved to a new stage (reading logs, analysing)."""

    def __init__(self, stage: str) -> None:
        super().__init__()
        self.stage = stage


class Loaded(Message):
    """The run is loaded and analysed."""

    def __init__(self, report, grid, group: str, seconds: float) -> None:
        super().__init__()
        self.report = report
        self.grid = grid
        self.group = group
        self.seconds = seconds


class Previewed(Message):
    """The first collectives of every rank are read: timelines can be shown while the rest loads."""

    def __init__(self, report, grid, group: str, per_rank: int) -> None:
        super().__init__()
        self.report = report
        self.grid = grid
        self.group = group
        self.per_rank = per_rank


class LoadFailed(Message):
    """The run cannot be read: `error` is the one-line message the CLI prints."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class CursorMoved(Message):
    """The timeline cursor moved to (row, column)."""

    def __init__(self, row: int, col: int) -> None:
        super().__init__()
        self.row = row
        self.col = col


class StatsReady(Message):
    """The stats view's statistics are computed (collcheck.stats.summary.Stats and their tables)."""

    def __init__(self, stats, renderables: list) -> None:
        super().__init__()
        self.stats = stats
        self.renderables = renderables


class FirstScreen(Message):
    """The loader process's first screen (loader.py): plain data, shown until the run is built."""

    def __init__(self, payload: dict) -> None:
        super().__init__()
        self.payload = payload


class LoaderGone(Message):
    """The loader process died before it was done: `error` is the one line the app shows."""

    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error
