"""Live mode's judge: what the checker on rank 0 (capture/live/checker.py) suspects, `collcheck diff`'s
analysis decides, on the logs of the running job read as a snapshot.

It runs as a process of its own (`python -m collcheck.cli.live RUN_DIR`, started by the checker at its
first suspicion), so the training job never imports the analysis. A finding is printed to the
job's stderr (this process shares it) and written to live-report.txt / live-report.json in the
run directory (docs/live.md). Log strings in them are escaped (`untrusted`): shown, never acted on.
"""

from __future__ import annotations

import json
import os
import time

from ..analysis.diff import Report, analyse
from ..base.untrusted import one_line, visible
from ..model import load_run, rank_ranges
from ..report.json_report import finding_dict, to_dict
from ..report.text import render_first

REPORT_NAME = "live-report"
HANG_KINDS = ("hang", "deadlock")


def judge(run_dir: str, request: dict) -> str | None:
    """Analyse the run now; on a finding, report it and return it in one line (None: nothing).

    request: what the checker suspects ({"kind": "divergence" | "hang", "group", "position",
    "ranks", "running": ranks still running, "wall": when it suspected it})."""
    run = load_run(run_dir, running=set(request.get("running") or ()))
    report = analyse(run)
    if request.get("kind") != "hang":  # the job moves on: unfinished collectives are in flight, not hung
        report.findings = [f for f in report.findings if f.kind not in HANG_KINDS]
    if not report.findings:
        return None
    first = report.findings[0]
    line = (f"{one_line(first.title)} in group {one_line(first.group)} at #{first.number}, "
            f"culprit rank{'s' if len(first.ranks) != 1 else ''} {rank_ranges(first.ranks)}")
    write_reports(run_dir, report, request, line)
    return line


def divergence_wall(report: Report) -> float | None:
    """When the first finding's collective was issued by the last rank that issued it (s since the
    epoch); for a group created differently, when the last rank created it."""
    first = report.findings[0]
    times = [e.t_issue for e in first.events.values() if e is not None] or [first.details.get("issued_us") or 0]
    return max(times) / 1e6 if max(times) else None


def write_reports(run_dir: str, report: Report, request: dict, line: str) -> None:
    """live-report.txt and .json in the run directory (each written whole, then renamed), and the
    text on stderr."""
    import io
    import sys

    now = time.time()
    since = divergence_wall(report)
    after = f", {now - since:.1f} s after it was issued" if since is not None else ""
    headline = (f"collcheck live: {line}{after}; the job is still running (a snapshot; "
                f"`collcheck diff {one_line(run_dir)}` for the whole report)")
    text = io.StringIO()
    render_first(report, text, headline)
    data = to_dict(report)
    data["live"] = {"first": finding_dict(report.findings[0], report.run), "suspicion": request,
                    "divergence_wall": since, "reported_wall": now}
    shown = visible(text.getvalue(), limit=1 << 20)  # (the renderer escapes log strings: a last guard)
    for suffix, body in ((".txt", shown), (".json", json.dumps(data, indent=1) + "\n")):
        path = os.path.join(run_dir, REPORT_NAME + suffix)
        with open(path + ".tmp", "w") as f:
            f.write(body)
        os.replace(path + ".tmp", path)
    sys.stderr.write(shown)
    sys.stderr.flush()
