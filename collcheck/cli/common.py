"""What several commands share: the argument that names a run, the launches a folder holds, and
the report file `-o` names (a new file, never written through a link nor over an input:
base/outputs.py)."""

from __future__ import annotations

import contextlib
import sys

from ..base.outputs import NO_INPUTS, Inputs, atomic_output, check_folder, check_output
from . import values

RUN_HELP = ("run directory (or a logs root: the newest run is used), or a directory of PyTorch Flight Recorder "
            "dumps")  # replay's: it reads one run
LAUNCHES_HELP = ("run directory, a folder of several launches (a logs root, a test suite's logs), one log file, or "
                 "a directory of PyTorch Flight Recorder dumps; several of them (a folder per node of one job) are "
                 "read as one")


def add_launch_arguments(parser) -> None:
    """The folder, and --launch: one of the launches it holds (docs/diff.md, 'Many launches')."""
    parser.add_argument("logs", nargs="+", type=values.path, help=LAUNCHES_HELP)
    parser.add_argument("--launch", metavar="ID",
                        help="only this launch of the folder (its id, or a prefix of one id only)")


def launches(args, writes: str | None = None, folder: bool = False) -> list:
    """The launches `args.logs` holds (inputs/launches.py), oldest first; only the one --launch
    names when it is given. `writes`: the file (`folder`: the folder) the command will write,
    refused before any log is read when it cannot be written or would land on an input."""
    from ..inputs.discover import discover_all
    from ..inputs.launches import find_launches, pick

    source = discover_all(args.logs)
    if writes:
        (check_folder if folder else check_output)(writes, source.inputs())
    found = find_launches(source)
    return [pick(found, args.launch, where(args))] if args.launch is not None else found


def report_each(report, found: list, args, work) -> None:
    """`work(launch)` of each launch added to `report` (one launch's unreadable log ends the
    command; among several it is a line of its own), then the report finished."""
    from ..logfile.reader import LogError

    several = len(found) > 1
    for launch in found:
        try:
            result = work(launch)
        except LogError as exc:
            if not several:
                raise
            report.add(launch.id, launch.world, error=str(exc))
            continue
        report.add(launch.id if several or args.launch is not None else None, launch.world, result)
    report.finish()


def where(args) -> str:
    """The paths the logs came from, as messages name them."""
    return " ".join(args.logs)


def one_launch(args, command: str, writes: str | None = None, folder: bool = False):
    """The Source of the launch --launch names, else of the only or the newest launch (said on
    stderr): for the commands that show one run. `writes`, `folder`: as for `launches`."""
    from ..inputs.launches import newest

    return newest(launches(args, writes, folder), where(args), command).source


def inputs_of(found: list) -> Inputs:
    """What the launches' logs (or dumps) are: what no output may replace."""
    return sum((launch.source.inputs() for launch in found), NO_INPUTS)


@contextlib.contextmanager
def output(path: str | None, inputs: Inputs = NO_INPUTS):
    """`-o PATH` as a new file (stdout without one), renamed into place when complete; a path that
    cannot be written, a link or one of `inputs` is a usage error (exit 2), not a traceback."""
    if not path:
        yield sys.stdout
        return
    with atomic_output(path, inputs=inputs) as out:
        yield out
