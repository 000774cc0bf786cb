"""GitHub Actions workflow commands: an annotation at each culprit's call site (for a rank that
skipped or stopped, at the call the others made).

A workflow command is one line the runner acts on, so nothing from a log may end it or start
another: every command is written by the guard (base/guard.py), which escapes each value as
GitHub documents, after `visible`/`one_line` made its control characters visible, and a line
number is written only when it is a plausible one (an int from 1 to 2^31 - 1)."""

from __future__ import annotations

import os

from ..base.guard import guarded
from ..base.untrusted import one_line, visible
from ..model import group_label, rank_ranges, stopped_ranks
from . import MESSAGE_CHARS

MAX_LINE = 2**31 - 1


def _line(value) -> int | None:
    if value.__class__ is int and 1 <= value <= MAX_LINE:  # not bool, str, float or a huge int
        return value
    return None


def _site_params(site) -> dict:
    if not site or not isinstance(site[0], str) or not site[0]:
        return {}
    path = os.path.relpath(site[0]) if os.path.isabs(site[0]) else site[0]
    return {"file": one_line(path), "line": _line(site[1]) if len(site) > 1 else None}


def render_launch(report, out, launch: str | None = None, **_) -> None:
    """The annotations of one run (`launch`: its id in a folder of several, in each title; a notice
    that it has no finding)."""
    render(report, out, launch=launch)
    if launch is not None and not report.findings:
        guarded(out).command("notice", f"no divergence found in launch {one_line(launch)}", title="collcheck")


def render(report, out, launch: str | None = None) -> None:
    """`launch`: the id of the launch the report is of (a folder of several), named in each title;
    no notice is then written for a launch without findings (report/launches.py writes one)."""
    out = guarded(out)
    for f in report.findings:
        e = next((f.events.get(r) for r in f.ranks if f.events.get(r) is not None and f.events[r].site), None)
        expected = f.expected if f.expected is not None and f.expected.site else None
        if expected is not None and (f.kind == "missing" or e is None):  # the call the culprit skipped
            e = expected
        if e is None:
            e = next((x for x in f.events.values() if x is not None and x.site), None)
        site = e.site if e is not None else f.details.get("site")  # non_member_call: no event
        params = _site_params(site)
        title = one_line(f"collcheck {f.kind} ({group_label(report.run, f.group)}, #{f.number})"
                         + (f" in launch {launch}" if launch is not None else ""))
        out.command("error", visible(f.message, MESSAGE_CHARS), **params, title=title)
    stopped = stopped_ranks(report.run)
    for ranks, why in stopped:  # ranks not checked to the end
        title = one_line("collcheck: recording stopped" + (f" in launch {launch}" if launch is not None else ""))
        text = f"rank{'s' if len(ranks) != 1 else ''} {rank_ranges(ranks)}: recording stopped: {why}; not checked after that"
        out.command("warning", visible(text, MESSAGE_CHARS), title=title)
    if not report.findings and launch is None:
        out.command("notice", "no divergence found" + (" in what could be checked" if stopped else ""), title="collcheck")
