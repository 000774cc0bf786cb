"""Exit codes, the usage error and the one error path shared by every entry point (`collcheck`,
`python -m collcheck`, live mode's judge, the TUI).

They live below the command line so that a layer which validates user input (a replay
what-if, a scenario name) can say "bad input" without importing the CLI above it. The error path
is here, not in each entry point, so that none of them can end in a traceback: bad input is one
line and exit 2, a bug one line and exit 3, whichever way a command is started.
"""

from __future__ import annotations

import sys

from .settings import Settings

OK, FINDINGS, INPUT_ERROR, INTERNAL_ERROR, INCOMPLETE = 0, 1, 2, 3, 4


class UsageError(Exception):
    """A command-line value that cannot be used; the message is one line for users (exit 2)."""


class LogError(Exception):
    """A file that cannot be read as a collcheck log or a dump; the message is one line for users (exit 2)."""


def input_errors() -> tuple:
    """The exceptions that mean "this input cannot be used" (exit 2): a usage error and an unreadable
    log (`reader.LogError`, imported here so that a caller needs to name neither)."""

    return (UsageError, LogError)


def print_error(exc_or_text, prog: str = "collcheck", kind: str = "error") -> None:
    """`prog: kind: message` as one line on stderr; the message may hold a log's strings (a path, a
    group name), so it is shown escaped (`untrusted.one_line`), never raw."""
    from .untrusted import one_line

    text = exc_or_text if isinstance(exc_or_text, str) else str(exc_or_text)
    print(f"{prog}: {kind}: {one_line(text)}", file=sys.stderr, flush=True)


def run_command(command, prog: str = "collcheck", guard_stdout: bool = True) -> int:
    """`command()`'s exit code, with every exception mapped to one line on stderr and an exit code:
    usage or input error 2, interrupted 2, a closed pipe 0, anything else (a bug) 3 (COLLCHECK_DEBUG=1
    re-raises it for the traceback). stderr, and stdout unless it is not a text stream for people
    (the TUI's terminal, the judge's answers), are behind the CI guard (base/guard.py) meanwhile."""
    from .guard import CommandGuard

    saved = sys.stdout, sys.stderr
    sys.stderr = CommandGuard(sys.stderr)
    if guard_stdout:
        sys.stdout = CommandGuard(sys.stdout)
    try:
        return _run(command, prog)
    finally:
        sys.stdout, sys.stderr = saved


def _run(command, prog: str) -> int:
    expected = input_errors()
    try:
        return command()
    except expected as exc:
        print_error(exc, prog)
        return INPUT_ERROR
    except KeyboardInterrupt:
        return INPUT_ERROR
    except BrokenPipeError:
        return OK
    except Exception as exc:  # a bug in collcheck: say so in one line, details on request
        print_error(f"{type(exc).__name__}: {exc} (set COLLCHECK_DEBUG=1 for a traceback)", prog, "internal error")
        if Settings.from_env().debug:
            raise
        return INTERNAL_ERROR


def parse_args(parser, argv):
    """`parser.parse_args(argv)`, or the exit code when argparse exits (2 on a usage error, after
    its own usage message; 0 for --help and --version)."""
    try:
        return parser.parse_args(argv)
    except SystemExit as exc:
        return INPUT_ERROR if exc.code not in (0, None) else OK
