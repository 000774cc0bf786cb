"""`collcheck export RUN -o OUT`: a Perfetto trace, or Flight Recorder dumps, of one launch (of a folder
of several: --launch ID, else the newest, said on stderr)."""

from __future__ import annotations

from ..base.errors import OK
from ..report.formats import exporter, exports_folder, formats
from . import values
from .common import add_launch_arguments, one_launch


def add_parser(commands) -> None:
    p = commands.add_parser("export", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=formats("export"), default=formats("export")[0],
                   help="perfetto: a trace JSON file; fr: a directory of Flight Recorder dumps (rank_<rank>)")
    p.add_argument("--output", "-o", type=values.path, required=True, help="the trace file (perfetto) or directory (fr)")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Write a run (or Flight Recorder dumps) as a Perfetto trace or as Flight Recorder dumps."""
    from ..model import load_run

    source = one_launch(args, "export", writes=args.output, folder=exports_folder(args.format))
    print(exporter(args.format)(load_run(source), args.output, source.inputs()))
    return OK
