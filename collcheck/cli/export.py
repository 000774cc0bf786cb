"""`collcheck export RUN -o OUT`: a Perfetto trace, or Flight Recorder dumps, of one launch (of a folder
of several: --launch ID, else the newest, said on stderr)."""

from __future__ import annotations

from ..base.errors import OK
from ..base.outputs import atomic_output
from . import values
from .common import add_launch_arguments, one_launch


def add_parser(commands) -> None:
    p = commands.add_parser("export", help=execute.__doc__)
    add_launch_arguments(p)
    p.add_argument("--format", choices=["perfetto", "fr"], default="perfetto",
                   help="perfetto: a trace JSON file; fr: a directory of Flight Recorder dumps (rank_<rank>)")
    p.add_argument("--output", "-o", type=values.path, required=True, help="the trace file (perfetto) or directory (fr)")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Write a run (or Flight Recorder dumps) as a Perfetto trace or as Flight Recorder dumps."""
    from ..model import load_run

    source = one_launch(args, "export", writes=args.output, folder=args.format == "fr")
    run = load_run(source)
    if args.format == "fr":
        from ..report import fr_export

        paths = fr_export.write(run, args.output, source.inputs())
        print(f"wrote {len(paths)} Flight Recorder dumps to {args.output} (torchfrtrace {args.output} -p rank_)")
        return OK
    from ..analysis.diff import analyse
    from ..report import perfetto
    from ..stats.summary import compute

    with atomic_output(args.output, inputs=source.inputs()) as out:
        perfetto.write(analyse(run), out, compute(run))
    print(f"wrote {args.output}: open it in https://ui.perfetto.dev")
    return OK
