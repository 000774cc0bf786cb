"""`collcheck` command line: record, show, diff, stats, export, tui, replay, lint, demo, build-fastpath.

One module per command, each with `add_parser` (its arguments) and `run(args)` (its exit code);
here only the parser that gathers them and `main`, which runs every command through the one error
path (base/errors.run_command). Live mode's judge, `python -m collcheck.cli.live`, is the other
entry point (live.py).

Exit codes: 0 no finding, 1 findings, 2 usage or input error, 3 internal error, 4 no finding but
ranks or groups that could not be checked (missing logs, empty or one-sided Flight Recorder dumps).
"""

from __future__ import annotations

import argparse
import sys

from ..base import __version__
from ..base.errors import parse_args, run_command
from . import build_fastpath, demo, diff, export, lint, record, replay, show, stats, tui

COMMANDS = (record, show, diff, stats, export, tui, replay, lint, demo, build_fastpath)  # in `collcheck --help`'s order


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="collcheck", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"collcheck {__version__}")
    commands = p.add_subparsers(dest="cmd", required=True)
    for command in COMMANDS:
        command.add_parser(commands)
    return p


def main(argv=None) -> int:
    args = parse_args(build_parser(), argv)
    if isinstance(args, int):
        return args
    return run_command(lambda: _run(args), guard_stdout=args.cmd != "tui")  # (the TUI's screen is no CI text)


def _run(args) -> int:
    if args.cmd not in ("build-fastpath", "lint"):  # the compiled recording path, built once without an extra step
        from ..capture.native import build as autobuild

        autobuild.start(foreground=args.cmd in ("record", "demo"))  # these launch jobs at once
    if args.cmd not in SHOW_PROGRESS:
        return args.handler(args)
    from ..base import progress
    from ..report.progress import StderrProgress

    previous = progress.use(StderrProgress())
    try:
        return args.handler(args)
    finally:
        progress.use(previous)


SHOW_PROGRESS = ("diff", "stats", "export", "replay", "show")  # (the TUI shows its own)


if __name__ == "__main__":
    sys.exit(main())
