"""GitHub Actions workflow commands: an annotation at each culprit's call site (for a rank that
skipped or stopped, at the call the others made)."""

from __future__ import annotations

import os

from ..model import group_label


def _esc(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def render(report, out) -> None:
    for f in report.findings:
        e = next((f.events.get(r) for r in f.ranks if f.events.get(r) is not None and f.events[r].site), None)
        expected = f.expected if f.expected is not None and f.expected.site else None
        if expected is not None and (f.kind == "missing" or e is None):  # the call the culprit skipped
            e = expected
        if e is None:
            e = next((x for x in f.events.values() if x is not None and x.site), None)
        params = []
        site = e.site if e is not None else f.details.get("site")  # non_member_call: no event
        if site:
            path = os.path.relpath(site[0]) if os.path.isabs(site[0]) else site[0]
            params += [f"file={path}", f"line={site[1]}"]
        params.append(f"title={_esc(f'collcheck {f.kind} ({group_label(report.run, f.group)}, #{f.number})')}")
        out.write(f"::error {','.join(params)}::{_esc(f.message)}\n")
    if not report.findings:
        out.write("::notice title=collcheck::no divergence found\n")
