"""The one rich Console every text report prints through (diff, show, stats, replay, live mode).

What these reports print holds strings from the logs, so the console never interprets it: no
markup (a gloo error reads "[/__w/pytorch/...]"), no emoji codes, no highlighting, no CI workflow
command (`base.guard`); the strings themselves are escaped by `base.untrusted` where the
renderers build their texts. One width rule for all: COLUMNS when set, else the width of the
terminal `out` is, else a default (a file, a pipe, a test).
"""

from __future__ import annotations

import os

from rich.console import Console

from ..base.guard import guarded

DEFAULT_WIDTH = 120


def width(out, default: int = DEFAULT_WIDTH) -> int:
    """The columns a report printed to `out` may use."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    if _isatty(out):
        try:
            return os.get_terminal_size(out.fileno()).columns
        except (AttributeError, OSError, ValueError):
            pass
    return default


def make_console(out, default_width: int = DEFAULT_WIDTH) -> Console:
    """A console that prints plain text to `out` (no colours, no terminal codes, a terminal or not);
    `default_width` where `out` is not a terminal and COLUMNS is not set."""
    return Console(file=guarded(out), width=width(out, default_width), highlight=False, markup=False,
                   emoji=False, force_terminal=False, color_system=None)


def progress_console(err) -> Console:
    """The console of a progress bar on a terminal's stderr (report/progress.py): the terminal's
    own features, no markup; what it shows is collcheck's words and counts, never a log's strings."""
    return Console(file=err, markup=False, emoji=False, highlight=False)


def _isatty(out) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):  # no such method, or a closed file
        return False
