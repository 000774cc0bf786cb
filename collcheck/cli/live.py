"""`python -m collcheck.cli.live RUN_DIR`: answers the live checker, one JSON line per request on
stdin, one line per answer on stdout ({"finding": "<one line>" or null}); ends at end of input
(rank 0 exited). A usage or input error (no run directory) is one line and exit 2, as for
`collcheck` (errors.run_command)."""

from __future__ import annotations

import json
import os
import sys

from ..base.errors import UsageError, print_error, run_command
from .live_judge import judge

PROG = "collcheck live"


def serve(argv: list[str]) -> int:
    if len(argv) != 1:
        raise UsageError("usage: python -m collcheck.cli.live RUN_DIR (requests as JSON lines on stdin)")
    run_dir = argv[0]
    if not os.path.isdir(run_dir):
        raise UsageError(f"{run_dir}: not a run directory")
    said = set()
    for line in sys.stdin:
        try:
            finding = judge(run_dir, json.loads(line))
        except Exception as exc:  # noqa: BLE001 - a log mid-write, a damaged file: no finding this time
            message = f"could not analyse {run_dir}: {type(exc).__name__}: {exc}"
            if message not in said:  # (once: the checker may ask again)
                said.add(message)
                print_error(message, PROG, "warning")
            finding = None
        sys.stdout.write(json.dumps({"finding": finding}) + "\n")
        sys.stdout.flush()
    return 0


def main(argv: list[str]) -> int:
    return run_command(lambda: serve(argv), PROG)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
