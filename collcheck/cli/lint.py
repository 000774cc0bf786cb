"""`collcheck lint PATH...`: calls that issue collectives under a per-rank condition, found in the
training script's source before the job runs (docs/lint.md)."""

from __future__ import annotations

import os

from ..base.errors import FINDINGS, OK, UsageError
from ..base.outputs import NO_INPUTS, Inputs, check_output
from ..report.formats import formats, reporter
from . import values
from .common import output


def add_parser(commands) -> None:
    p = commands.add_parser("lint", help=execute.__doc__)
    p.add_argument("paths", nargs="+", type=values.path, metavar="PATH", help="Python files or folders (read, never run)")
    p.add_argument("--logs", type=values.path, metavar="RUN", help="a recorded run: the calls its call chains show issuing "
                   "collectives count too (for frameworks collcheck has no table of)")
    p.add_argument("--format", choices=formats("lint"), default=formats("lint")[0])
    p.add_argument("--output", "-o", type=values.path, help="write the report to this file")
    p.add_argument("--no-libraries", action="store_true", help="do not read installed packages' source for the "
                   "collectives their functions issue (only the framework tables and the program's own code)")
    p.add_argument("--strict", action="store_true", help="warnings (calls that issue collectives only in some "
                   "configurations, conditions on this rank's data) fail too: exit 1")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Find collectives under rank-dependent branches in Python sources, before the job runs."""
    from ..lint import lint_paths

    missing = [p for p in args.paths if not os.path.exists(p)]
    if missing:
        raise UsageError(f"no such file or folder: {missing[0]}")
    if args.logs is not None and not os.path.exists(args.logs):
        raise UsageError(f"no such run: {args.logs}")
    inputs = NO_INPUTS
    if args.output:
        inputs = _inputs(args)
        check_output(args.output, inputs)  # before the work: not onto a linted file
    from ..base.settings import Settings

    result = lint_paths(args.paths, logs=args.logs, libraries=not args.no_libraries,
                        cache_dir=Settings.from_env().cache_dir)
    with output(args.output, inputs) as out:
        report = reporter("lint", args.format, out)
        report.add(None, 0, result)
        report.finish()
    failing = [f for f in result.findings if f.certain or args.strict]
    return FINDINGS if failing and not args.exit_zero else OK


def _inputs(args) -> Inputs:
    """What lint reads: the files named, the Python files of the folders named, the run of --logs."""
    files = tuple(p for p in args.paths if not os.path.isdir(p))
    inputs = Inputs(files, tuple((p, (".py",)) for p in args.paths if os.path.isdir(p)))
    if args.logs is not None:
        from ..inputs.discover import discover

        inputs += discover(args.logs).inputs()
    return inputs
