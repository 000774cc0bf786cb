"""`collcheck lint`'s outputs: text, json, GitHub annotations and SARIF (for code scanning).

Source text quoted in a finding is the linted file's, shown through `one_line` like any other
string collcheck did not write (a file can hold terminal escapes in a string literal)."""

from __future__ import annotations

import os

from ..base import __version__
from ..base.guard import guarded
from ..base.untrusted import one_line
from .json_report import write_json

LINT_JSON_VERSION = 1
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
RULE_TEXT = ("A call that issues collectives runs under a condition that differs per rank (its rank or its "
             "own data): the ranks that do not take the branch never issue it, and the job hangs or its "
             "collectives mismatch.")


def render_text(result, out, **_) -> None:
    _text(result, guarded(out))


def render_json(result, out, **_) -> None:
    _json(result, guarded(out))


def render_github(result, out, **_) -> None:
    """Annotations: the only workflow commands lint writes, through the CI guard (base/guard.py),
    like every other line of every format (a linted file's name or source text forms none)."""
    _github(result, guarded(out))


def render_sarif(result, out, **_) -> None:
    _sarif(result, guarded(out))


def _rel(path: str) -> str:
    """A path under the current folder relative to it (as code scanning and editors want), others as given."""
    if os.path.isabs(path):
        rel = os.path.relpath(path)
        return path if rel.startswith("..") else rel
    return path


def _text(result, out) -> None:
    for f in result.findings:
        out.write(f"{one_line(_rel(f.path))}:{f.line}:{f.col + 1}: {f.severity} {f.rule} {one_line(f.message)}\n")
        for path, line, text in f.chain[1:]:
            out.write(f"    via {one_line(_rel(path))}:{line}: {one_line(text)}\n")
        if not f.certain:
            out.write(f"    a warning: {f.uncertain}\n")
        out.write(f"    fix: {one_line(f.fix)}\n")
    for note in result.skipped:
        out.write(f"note: skipped {one_line(note)}\n")
    if result.libraries:
        out.write("libraries read: " + ", ".join(
            f"{one_line(r['package'])} {one_line(r['version'])} ({r['modules']} modules, from {r['from']})"
            for r in result.libraries) + "\n")
    n = len(result.findings)
    errors = sum(f.certain for f in result.findings)
    files = len({f.path for f in result.findings})
    learned = f", {result.learned} call sites learned from the run" if result.learned else ""
    split = f": {errors} error{'s' * (errors != 1)}, {n - errors} warning{'s' * (n - errors != 1)}" if n else ""
    out.write(f"collcheck lint: {n} finding{'s' * (n != 1)}" + (f" in {files} file{'s' * (files != 1)}" if n else "")
              + split + f" ({result.files} files, {result.lines} lines, {result.seconds:.2f} s{learned})\n")


def finding_dict(f) -> dict:
    return {"rule": f.rule, "severity": f.severity, "uncertain": f.uncertain or None, "kind": f.kind, "file": f.path, "line": f.line, "column": f.col + 1, "call": f.call,
            "issues": f.api, "framework": f.framework,
            "branch": {"file": f.branch_path, "line": f.branch_line, "source": f.branch, "how": f.how},
            "why": f.why, "message": f.message, "fix": f.fix,
            "chain": [{"file": p, "line": line, "source": text} for p, line, text in f.chain]}


def _json(result, out) -> None:
    errors = sum(f.certain for f in result.findings)
    write_json({"version": LINT_JSON_VERSION, "findings": [finding_dict(f) for f in result.findings],
                "errors": errors, "warnings": len(result.findings) - errors,
               "files": result.files, "lines": result.lines, "seconds": round(result.seconds, 3),
               "skipped": result.skipped, "learned_sites": result.learned, "libraries": result.libraries},
               out, indent=1)
    out.write("\n")


def _github(result, out) -> None:
    out = guarded(out)
    for f in result.findings:
        note = f" (a warning: {f.uncertain})" if not f.certain else ""
        out.command(f.severity, one_line(f.message + note + " Fix: " + f.fix), file=one_line(_rel(f.path)), line=f.line,
                    col=f.col + 1, title=one_line(f"collcheck {f.rule} ({f.kind})"))
    if not result.findings:
        out.command("notice", "no call that issues collectives under a per-rank condition", title="collcheck lint")


def _location(path: str, line: int, col: int | None = None, message: str | None = None) -> dict:
    region = {"startLine": line}
    if col is not None:
        region["startColumn"] = col + 1
    loc = {"physicalLocation": {"artifactLocation": {"uri": _rel(path).replace(os.sep, "/")}, "region": region}}
    if message is not None:
        loc["message"] = {"text": message}
    return loc


def _sarif(result, out) -> None:
    results = []
    for f in result.findings:
        flow = [{"location": _location(p, line, message=text)} for p, line, text in f.chain]
        results.append({
            "ruleId": f.rule, "level": f.severity,
            "message": {"text": f"{f.message} Fix: {f.fix}"},
            "locations": [_location(f.path, f.line, f.col)],
            "relatedLocations": [{"id": 1, **_location(f.branch_path, f.branch_line, message=f"the per-rank "
                                                       f"condition: {f.branch}")}],
            "codeFlows": [{"threadFlows": [{"locations": flow}]}],
            "properties": {"kind": f.kind, "why": f.why, "framework": f.framework,
                           **({"uncertain": f.uncertain} if not f.certain else {})},
        })
    rule = {"id": "rank-branch", "name": "RankDependentCollective", "shortDescription": {"text": "A collective "
            "under a per-rank condition"}, "fullDescription": {"text": RULE_TEXT}, "help": {"text": RULE_TEXT},
            "defaultConfiguration": {"level": "error"}}
    write_json({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{
        "tool": {"driver": {"name": "collcheck", "version": __version__, "rules": [rule]}},
        "results": results}]}, out, indent=1)
    out.write("\n")
