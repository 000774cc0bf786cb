"""`collcheck diff RUN`: the report, and an exit code for CI; a folder of several launches gets one
line per launch and the full report of those with findings (docs/diff.md, 'Many launches')."""

from __future__ import annotations

from ..base.errors import FINDINGS, INCOMPLETE, INPUT_ERROR, OK
from ..report.formats import formats, reporter
from . import values
from .common import (
    add_launch_arguments,
    inputs_of,
    launches,
    output,
    report_each,
    where,
)

MAX_CONTEXT = 1000  # collectives each side of the divergence


def add_parser(commands) -> None:
    p = commands.add_parser("diff", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=formats("diff"), default=formats("diff")[0])
    p.add_argument("--output", "-o", type=values.path, help="write the report to this file")
    p.add_argument("--context", type=values.count(0, MAX_CONTEXT), default=4,
                   help=f"collectives shown around the divergence (0..{MAX_CONTEXT})")
    p.add_argument("--source-root", type=values.path, metavar="DIR",
                   help="where the recorded program's files are here (logs from another machine): the source "
                        "says which rank took a branch where no majority does")
    p.add_argument("--no-source", action="store_true", help="blame from the trace alone (never read the program)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings or unchecked ranks")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Align the ranks' collectives, report the first divergence and any hang (each launch's)."""
    found = launches(args, writes=args.output)
    with output(args.output, inputs_of(found)) as out:
        report = reporter("diff", args.format, out, where=where(args), ids=[launch.id for launch in found],
                          context=args.context)
        report_each(report, found, args, lambda launch: _analysed(launch, args.source_root, not args.no_source))
    return exit_code(report.counts, args.exit_zero)


def exit_code(counts: dict, exit_zero: bool) -> int:
    """1 when any launch has findings, else 2 when any could not be read, else 4 when any is
    incomplete, else 0; --exit-zero: 0 but for an unreadable one."""
    if counts["findings"] and not exit_zero:
        return FINDINGS
    if counts["unreadable"]:
        return INPUT_ERROR
    return INCOMPLETE if counts["incomplete"] and not exit_zero else OK


def _analysed(launch, source_root: str | None = None, read_source: bool = True):
    from ..analysis.diff import analyse
    from ..model import load_run

    return analyse(load_run(launch.source), source_root, read_source)
