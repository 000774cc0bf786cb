"""`collcheck tui RUN`: the terminal UI."""

from __future__ import annotations

from .common import add_run_argument


def add_parser(commands) -> None:
    p = commands.add_parser("tui", help=execute.__doc__)
    add_run_argument(p)
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Explore a run in a terminal UI: overview, side-by-side timelines, wait-for graph, step mode."""
    from ..tui.app import run_tui

    return run_tui(args.logs)
