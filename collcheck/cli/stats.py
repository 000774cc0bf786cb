"""`collcheck stats RUN`: where communication time goes; a folder of several launches gets a line
per launch (--launch ID: one launch's tables)."""

from __future__ import annotations

import sys

from ..base.errors import INPUT_ERROR, OK
from ..report.formats import formats, reporter
from . import values
from .common import add_launch_arguments, launches, report_each, where


def add_parser(commands) -> None:
    p = commands.add_parser("stats", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=formats("stats"), default=formats("stats")[0])
    p.add_argument("--top", type=values.count(0, 1 << 20), default=20,
                   help="call sites (most time first) and groups shown in the tables")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Where communication time goes: per call site, op and group; stragglers; what to change."""
    from ..model import load_run
    from ..stats.summary import compute

    found = launches(args)
    report = reporter("stats", args.format, sys.stdout, where=where(args), ids=[launch.id for launch in found],
                      top=args.top)
    report_each(report, found, args, lambda launch: compute(load_run(launch.source, times=True)))
    return INPUT_ERROR if report.counts["unreadable"] else OK
