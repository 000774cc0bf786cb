"""`collcheck record -- COMMAND`: run a command with recording on."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ..base.errors import UsageError
from ..base.settings import Settings, new_run_id
from . import values


def add_parser(commands) -> None:
    p = commands.add_parser("record", help=execute.__doc__)
    p.add_argument("--dir", type=values.path, help="log directory (COLLCHECK_DIR, default ./collcheck-logs)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    p.set_defaults(handler=execute)


def execute(args) -> int:
    """Run a command with recording on (sets COLLCHECK=1 and a fresh run id)."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command  # argparse keeps the "--"
    if not command:
        raise UsageError("collcheck record: give a command, e.g. "
                         "collcheck record -- torchrun --nproc-per-node 2 train.py")
    settings = Settings.from_env()
    run_id = settings.run_id or new_run_id()
    env = dict(os.environ, COLLCHECK="1", COLLCHECK_RUN_ID=run_id)
    if args.dir:
        env["COLLCHECK_DIR"] = args.dir
    try:
        rc = subprocess.call(command, env=env)
    except FileNotFoundError:
        raise UsageError(f"collcheck record: command not found: {command[0]}") from None
    directory = os.path.join(args.dir or settings.directory, run_id)
    print(f"collcheck: logs in {directory} (command exited with {rc})", file=sys.stderr)
    return rc
