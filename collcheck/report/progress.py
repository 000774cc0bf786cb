"""Progress of a long read on stderr (base/progress.py says how far the work is): a rich progress
bar on a terminal; elsewhere (CI logs, a pipe) one plain line every few seconds. Nothing for
work that ends within DELAY_S, so a quick command prints nothing more than before. Never on
stdout: reports there (json, junit) stay exactly what they were."""

from __future__ import annotations

import sys
import time

from ..base.progress import Progress
from .console import _isatty, progress_console

DELAY_S = 2.0  # work shorter than this shows nothing
EVERY_S = 5.0  # a plain line at most this often


class StderrProgress(Progress):
    def __init__(self, err=None, clock=time.monotonic):
        self.err = err or sys.stderr
        self.clock = clock
        self.tty = _isatty(self.err)
        self.what, self.total, self.done = "", 0, 0
        self.started = self.said = 0.0
        self.bar = self.task = None

    def start(self, what: str, total: int) -> None:
        self.what, self.total, self.done = what, total, 0
        self.started = self.said = self.clock()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        if now - self.started < DELAY_S:
            return
        if self.tty:
            self._bar_to(self.done)
        elif now - self.said >= EVERY_S or self.said == self.started:
            self.said = now
            print(f"collcheck: {self.what}: {self.done:,} of {self.total:,}", file=self.err, flush=True)

    def finish(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = self.task = None

    def _bar_to(self, done: int) -> None:
        if self.bar is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as Bar

            self.bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                           console=progress_console(self.err), transient=True)
            self.task = self.bar.add_task(self.what, total=self.total)
            self.bar.start()
        self.bar.update(self.task, completed=done)
