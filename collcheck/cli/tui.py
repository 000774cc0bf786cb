"""`collcheck tui RUN`: the terminal UI, on one launch (of a folder of several: --launch ID, else
the newest, said on stderr)."""

from __future__ import annotations

from .common import add_launch_arguments, one_launch


def add_parser(commands) -> None:
    p = commands.add_parser("tui", help=execute.__doc__)
    add_launch_arguments(p)
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Explore a run in a terminal UI: overview, side-by-side timelines, wait-for graph, step mode."""
    from ..tui import app

    return app.run_tui(one_launch(args, "tui"))
