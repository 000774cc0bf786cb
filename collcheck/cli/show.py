"""`collcheck show LOG`: one rank's log as a table."""

from __future__ import annotations

import sys

from ..base.errors import OK
from . import values


def add_parser(commands) -> None:
    p = commands.add_parser("show", help=execute.__doc__)
    p.add_argument("log", type=values.path)
    p.add_argument("--limit", type=values.count(0, 1 << 63), default=0, help="show only the last N collectives")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Print one rank's log as a table."""
    from ..report.show import show

    show(args.log, sys.stdout, limit=args.limit)
    return OK
