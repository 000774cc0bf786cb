"""What several commands share: the argument that names a run, the launches a folder holds, and
the report file `-o` names."""

from __future__ import annotations

import contextlib
import sys

from ..base.errors import UsageError

RUN_HELP = ("run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder "
            "dumps")  # replay's: it reads one run
LAUNCHES_HELP = ("run directory, a folder of several launches (a logs root, a test suite's logs), one log file, or "
                 "a directory of PyTorch Flight Recorder dumps")


def add_launch_arguments(parser) -> None:
    """The folder, and --launch: one of the launches it holds (docs/diff.md, 'Many launches')."""
    parser.add_argument("logs", help=LAUNCHES_HELP)
    parser.add_argument("--launch", metavar="ID",
                        help="only this launch of the folder (its id, or a prefix of one id only)")


def launches(args) -> list:
    """The launches `args.logs` holds (inputs/launches.py), oldest first; only the one --launch
    names when it is given."""
    from ..inputs.discover import discover
    from ..inputs.launches import find_launches, pick

    found = find_launches(discover(args.logs))
    return [pick(found, args.launch, args.logs)] if args.launch is not None else found


def one_launch(args, command: str):
    """The Source of the launch --launch names, else of the only or the newest launch (said on
    stderr): for the commands that show one run."""
    from ..inputs.launches import newest

    return newest(launches(args), args.logs, command).source


@contextlib.contextmanager
def output(path: str | None):
    """`-o PATH` opened for writing (stdout without one); one that cannot be written is a usage
    error (exit 2), not a traceback."""
    if not path:
        yield sys.stdout
        return
    try:
        out = open(path, "w")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    with out:
        yield out
