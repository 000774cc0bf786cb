"""`collcheck stats RUN`: where communication time goes; a folder of several launches gets a line
per launch (--launch ID: one launch's tables)."""

from __future__ import annotations

import sys

from ..base.errors import INPUT_ERROR, OK
from ..report.formats import formats, reporter
from . import values
from .common import add_launch_arguments, launches, where


def add_parser(commands) -> None:
    p = commands.add_parser("stats", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=formats("stats"), default=formats("stats")[0])
    p.add_argument("--top", type=values.count(0, 1 << 20), default=20,
                   help="call sites (most time first) and groups shown in the tables")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Where communication time goes: per call site, op and group; stragglers; what to change."""
    from ..logfile.reader import LogError
    from ..model import load_run
    from ..stats.summary import compute

    found = launches(args)
    several = len(found) > 1
    report = reporter("stats", args.format, sys.stdout, where=where(args), ids=[launch.id for launch in found],
                      top=args.top)
    for launch in found:
        try:
            st = compute(load_run(launch.source, times=True))
        except LogError as exc:
            if not several:
                raise
            report.add(launch.id, launch.world, error=str(exc))
            continue
        report.add(launch.id if several or args.launch is not None else None, launch.world, st)
    report.finish()
    return INPUT_ERROR if report.counts["unreadable"] else OK
