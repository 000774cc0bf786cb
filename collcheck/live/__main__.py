"""`python -m collcheck.live RUN_DIR`: answers the live checker, one JSON line per request on
stdin, one line per answer on stdout ({"finding": "<one line>" or null}); ends at end of input
(rank 0 exited)."""

from __future__ import annotations

import json
import sys

from . import judge


def main(argv: list[str]) -> int:
    run_dir = argv[0]
    said = set()
    for line in sys.stdin:
        try:
            finding = judge(run_dir, json.loads(line))
        except Exception as exc:  # noqa: BLE001 - a log mid-write, a damaged file: no finding this time
            message = f"collcheck live: could not analyse {run_dir}: {type(exc).__name__}: {exc}"
            if message not in said:  # (once: the checker may ask again)
                said.add(message)
                sys.stderr.write(message + "\n")
            finding = None
        sys.stdout.write(json.dumps({"finding": finding}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
