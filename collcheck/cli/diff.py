"""`collcheck diff RUN`: the report, and an exit code for CI; a folder of several launches gets one
line per launch and the full report of those with findings (docs/diff.md, 'Many launches')."""

from __future__ import annotations

from ..base.errors import FINDINGS, INCOMPLETE, INPUT_ERROR, OK
from . import values
from .common import add_launch_arguments, inputs_of, launches, output

MAX_CONTEXT = 1000  # collectives each side of the divergence


def add_parser(commands) -> None:
    p = commands.add_parser("diff", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=["text", "json", "junit", "github"], default="text")
    p.add_argument("--output", "-o", type=values.path, help="write the report to this file")
    p.add_argument("--context", type=values.count(0, MAX_CONTEXT), default=4,
                   help=f"collectives shown around the divergence (0..{MAX_CONTEXT})")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings or unchecked ranks")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Align the ranks' collectives, report the first divergence and any hang (each launch's)."""
    found = launches(args, writes=args.output)
    report = _analysed(found[0]) if len(found) == 1 else None
    with output(args.output, inputs_of(found)) as out:
        if report is None:
            return _several(args, found, out)
        if args.launch is not None:
            from ..report.launches import render_one

            render_one(report, args.format, out, found[0].id, args.logs, context=args.context)
        else:
            from ..report import render

            render(report, args.format, out, context=args.context)
    if args.exit_zero:
        return OK
    return FINDINGS if report.findings else INCOMPLETE if report.verdict == "incomplete" else OK


def _analysed(launch):
    from ..analysis.diff import analyse
    from ..model import load_run

    return analyse(load_run(launch.source))


def _several(args, found, out) -> int:
    """Each launch checked and reported in turn; 1 when any has findings, else 2 when any could not
    be read, else 4 when any is incomplete (--exit-zero: 0 but for an unreadable one), else 0."""
    from ..logfile.reader import LogError
    from ..report.launches import FORMATS

    report = FORMATS[args.format](out, args.logs, [launch.id for launch in found], context=args.context)
    for launch in found:
        try:
            report.add(launch.id, launch.world, _analysed(launch))
        except LogError as exc:
            report.add(launch.id, launch.world, error=str(exc))
    report.finish()
    counts = report.counts
    if counts["findings"] and not args.exit_zero:
        return FINDINGS
    if counts["unreadable"]:
        return INPUT_ERROR
    return INCOMPLETE if counts["incomplete"] and not args.exit_zero else OK
