"""Live mode's report of a finding in a running job (docs/live.md): one line for the checker, and
live-report.txt / live-report.json in the run directory, the text also on the job's stderr (the
judge, cli/live.py, shares it). Log strings in them are escaped (`base.untrusted`): shown, never
acted on. Each file is written whole under a new name and renamed into place (base/outputs.py): a
link left at its name is replaced, never followed."""

from __future__ import annotations

import io
import json
import os
import sys
import time

from ..base.guard import guard_lines, guarded
from ..base.outputs import atomic_output
from ..base.untrusted import one_line, visible
from ..model import rank_ranges
from .json_report import finding_dict, to_dict
from .text import render_first

REPORT_NAME = "live-report"
NOTES_SHOWN = 8  # ranks missing from the snapshot (or sent in part) said in the text, one line each


def finding_line(report) -> str:
    """The first finding in one line (the judge's answer to the checker)."""
    first = report.findings[0]
    return (f"{one_line(first.title)} in group {one_line(first.group)} at #{first.number}, "
            f"culprit rank{'s' if len(first.ranks) != 1 else ''} {rank_ranges(first.ranks)}")


def divergence_wall(report) -> float | None:
    """When the first finding's collective was issued by the last rank that issued it (s since the
    epoch); for a group created differently, when the last rank created it."""
    first = report.findings[0]
    times = [e.t_issue for e in first.events.values() if e is not None] or [first.details.get("issued_us") or 0]
    return max(times) / 1e6 if max(times) else None


def write(run_dir: str, report, request: dict, line: str) -> None:
    """live-report.txt and .json in the run directory (each written whole, then renamed), and the
    text on stderr. `request`: what the checker suspected (kept in the JSON), and its `logs`: a
    line per rank missing from the snapshot or sent in part (said after the finding)."""
    now = time.time()
    since = divergence_wall(report)
    after = f", {now - since:.1f} s after it was issued" if since is not None else ""
    hosts = len(report.run.hosts)
    whole = (f"`collcheck diff {one_line(run_dir)}`" if hosts < 2 else
             f"`collcheck diff` of this run's folders on its {hosts} hosts, together,")
    headline = f"collcheck live: {line}{after}; the job is still running (a snapshot; {whole} for the whole report)"
    text = io.StringIO()
    render_first(report, text, headline)
    data = to_dict(report)
    notes = [str(n) for n in request.get("logs") or ()]
    for note in notes[:NOTES_SHOWN]:
        text.write(f"collcheck live: {note}\n")
    if len(notes) > NOTES_SHOWN:
        text.write(f"collcheck live: ... {len(notes) - NOTES_SHOWN:,} more ranks so (live-report.json: live.logs)\n")
    suspicion = {k: v for k, v in request.items() if k not in ("snapshot", "logs")}
    data["live"] = {"first": finding_dict(report.findings[0], report.run), "suspicion": suspicion,
                    "divergence_wall": since, "reported_wall": now, "logs": notes}
    shown = guard_lines(visible(text.getvalue(), limit=1 << 20))  # (the renderer escapes log strings: a last guard)
    for suffix, body in ((".txt", shown), (".json", guard_lines(json.dumps(data, indent=1) + "\n", "json"))):
        with atomic_output(os.path.join(run_dir, REPORT_NAME + suffix), replace_link=True) as f:
            f.write(body)
    err = guarded(sys.stderr)
    err.write(shown)
    err.flush()
