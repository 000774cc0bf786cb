"""`collcheck diff RUN`: the report, and an exit code for CI."""

from __future__ import annotations

import sys

from ..base.errors import FINDINGS, INCOMPLETE, OK
from .common import add_run_argument


def add_parser(commands) -> None:
    p = commands.add_parser("diff", help=execute.__doc__)
    add_run_argument(p)
    p.add_argument("--format", choices=["text", "json", "junit", "github"], default="text")
    p.add_argument("--output", "-o", help="write the report to this file")
    p.add_argument("--context", type=int, default=4, help="collectives shown around the divergence")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings or unchecked ranks")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Align the ranks' collectives, report the first divergence and any hang."""
    from ..analysis.diff import analyse
    from ..inputs.discover import discover
    from ..model import load_run
    from ..report import render

    report = analyse(load_run(discover(args.logs, newest=True)))
    out = open(args.output, "w") if args.output else sys.stdout
    try:
        render(report, args.format, out, context=args.context)
    finally:
        if args.output:
            out.close()
    if args.exit_zero:
        return OK
    return FINDINGS if report.findings else INCOMPLETE if report.verdict == "incomplete" else OK
