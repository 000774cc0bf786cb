"""`collcheck stats RUN`: where communication time goes; a folder of several launches gets a line
per launch (--launch ID: one launch's tables)."""

from __future__ import annotations

import sys

from ..base.errors import INPUT_ERROR, OK
from . import values
from .common import add_launch_arguments, launches


def add_parser(commands) -> None:
    p = commands.add_parser("stats", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--top", type=values.count(0, 1 << 20), default=20,
                   help="call sites (most time first) and groups shown in the tables")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Where communication time goes: per call site, op and group; stragglers; what to change."""
    from ..model import load_run
    from ..report.stats import render
    from ..stats.summary import compute

    found = launches(args)
    if len(found) > 1:
        return _several(args, found)
    st = compute(load_run(found[0].source, times=True))
    if args.launch is not None and args.format == "json":
        from ..report.json_report import write_json
        from ..report.launches import with_launch
        from ..report.stats import to_dict

        write_json(with_launch(to_dict(st), found[0].id), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return OK
    render(st, args.format, sys.stdout, top=args.top)
    return OK


def _several(args, found) -> int:
    """A line per launch (or a list of per-launch statistics); 2 when one could not be read."""
    from ..logfile.reader import LogError
    from ..model import load_run
    from ..report.launches import render_stats
    from ..stats.summary import compute

    def results():
        for launch in found:
            try:
                yield launch.id, launch.world, compute(load_run(launch.source, times=True)), None
            except LogError as exc:
                yield launch.id, launch.world, None, str(exc)

    unreadable = render_stats(results(), args.format, sys.stdout, args.logs, [launch.id for launch in found])
    return INPUT_ERROR if unreadable else OK
