"""Progress of long reads on stderr (report/progress.py, base/progress.py): nothing for quick
work, a plain line every few seconds off a terminal, and the reports on stdout untouched."""

from __future__ import annotations

import io

from support.cli import run_cli

from collcheck.base import progress
from collcheck.report.progress import DELAY_S, EVERY_S, StderrProgress
from collcheck.synth import write_clean_run


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_quick_work_shows_nothing_and_slow_work_a_line_every_few_seconds():
    err, clock = io.StringIO(), Clock()
    shown = StderrProgress(err, clock)
    previous = progress.use(shown)
    try:
        assert list(progress.tracked("reading logs", range(100), 100)) == list(range(100))
        assert err.getvalue() == ""
        lines = []
        for n in progress.tracked("reading logs", range(40), 40):
            clock.now += 0.5
            lines = err.getvalue().splitlines()
        assert lines[0] == f"collcheck: reading logs: {int(DELAY_S / 0.5):,} of 40"
        assert len(lines) == 1 + int((40 * 0.5 - DELAY_S) // EVERY_S)
    finally:
        progress.use(previous)


def test_nothing_is_shown_unless_a_command_asks():
    assert type(progress.use(None)) is progress.Progress  # (the default: shows nothing)
    assert list(progress.tracked("x", iter("ab"), 2)) == ["a", "b"]


def test_a_json_report_is_the_same_with_progress_shown(tmp_path):
    write_clean_run(str(tmp_path), 16, 50)
    res = run_cli("diff", str(tmp_path), "--format", "json")
    assert res.code == 0 and res.out.lstrip().startswith("{") and "collcheck:" not in res.out
    assert type(progress.use(None)) is progress.Progress  # (the command put back what it replaced)
