"""`collcheck build-fastpath [--status]`: the compiled recording path."""

from __future__ import annotations


def add_parser(commands) -> None:
    p = commands.add_parser("build-fastpath", help=execute.__doc__)
    p.add_argument("--status", action="store_true",
                   help="only say whether it is built and in use, or why not (exit 1 if not built)")
    p.add_argument("--verbose", action="store_true", help="show the compiler's output")
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Compile the recording fast path with the installed torch now (the first command does it
    otherwise); --status: is it in use, and if not, why."""
    from ..capture.native import build as autobuild

    return autobuild.command(args.status, args.verbose)
