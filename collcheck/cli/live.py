"""Live mode's judge, `python -m collcheck.cli.live RUN_DIR`: what the checker on rank 0
(capture/live/checker.py) suspects, `collcheck diff`'s analysis decides, on the logs of the running
job read as a snapshot: those the ranks sent through the job's store, which the checker wrote into
a folder of its own (a request's `snapshot`); the report goes to RUN_DIR.

It runs as a process of its own, started by the checker at its first suspicion, so the training
job never imports the analysis. It answers one JSON line per request on stdin with one line on
stdout ({"finding": "<one line>" or null}) and ends at end of input (rank 0 exited); a finding is
also reported (report/live.py). A usage or input error (no run directory) is one line and exit 2,
as for `collcheck` (errors.run_command).
"""

from __future__ import annotations

import json
import os
import sys

from ..analysis.diff import analyse
from ..base.errors import UsageError, print_error, run_command
from ..capture.live.gather import read_ends
from ..model import load_run
from ..report import live

PROG = "collcheck live"
HANG_KINDS = ("hang", "deadlock")


def judge(run_dir: str, request: dict) -> str | None:
    """Analyse the run now; on a finding, report it and return it in one line (None: nothing).

    request: what the checker suspects ({"kind": "divergence" | "hang", "group", "position",
    "ranks", "running": ranks still running, "wall": when it suspected it}) and where the logs
    are ("snapshot": the folder the checker wrote them into, else RUN_DIR's own; "logs": a line
    per rank missing from it or sent in part, said in the report; "ends": the file of the ends
    of the logs of the ranks that sent only that, of "world" ranks: capture/live/gather.py)."""
    ends = read_ends(request["ends"], int(request["world"])) if request.get("ends") else None
    run = load_run(request.get("snapshot") or run_dir, running=set(request.get("running") or ()), ends=ends)
    run.directory = run_dir  # (the snapshot's folder is gone after the answer)
    run.warnings += [str(note) for note in request.get("logs") or ()]
    report = analyse(run)
    if request.get("kind") != "hang":  # the job moves on: unfinished collectives are in flight, not hung
        report.findings = [f for f in report.findings if f.kind not in HANG_KINDS]
    if not report.findings:
        return None
    line = live.finding_line(report)
    live.write(run_dir, report, request, line)
    return line


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
    return run_command(lambda: serve(argv), PROG, guard_stdout=False)  # (stdout: answers to the checker)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
