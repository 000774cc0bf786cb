"""`collcheck stats RUN`: where communication time goes."""

from __future__ import annotations

import sys

from ..base.errors import OK
from .common import add_run_argument


def add_parser(commands) -> None:
    p = commands.add_parser("stats", help=execute.__doc__)
    add_run_argument(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--top", type=int, default=20, help="call sites shown in the table (most time first)")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Where communication time goes: per call site, op and group; stragglers; what to change."""
    from ..inputs.discover import discover
    from ..model import load_run
    from ..report.stats import render
    from ..stats.summary import compute

    render(compute(load_run(discover(args.logs, newest=True))), args.format, sys.stdout, top=args.top)
    return OK
