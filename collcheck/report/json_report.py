"""Machine-readable report (schema version in JSON_VERSION; documented in docs/diff.md)."""

from __future__ import annotations

import json

from ..model import REDUCE_OPS, group_label

JSON_VERSION = 1


def event_dict(e) -> dict | None:
    if e is None:
        return None
    s, sized = e.sig, e.sized  # all-to-all: sizes as recorded
    out = {
        "rank": e.rank, "index": e.index, "group": e.group, "position": e.position, "op": s.op, "api": s.api,
        "dtypes": list(s.dtypes), "shapes": [list(x) for x in sized.shapes], "numel": sized.numel,
        "bytes": sized.nbytes,
        "reduce_op": REDUCE_OPS.get(s.reduce_op, s.reduce_op) if s.reduce_op is not None else None,
        "root_or_peer": s.root, "root_or_peer_global": e.peer_global, "role": s.role, "label": e.label,
        "site": {"file": e.site[0], "line": e.site[1], "function": e.site[2]} if e.site else None,
        "thread": e.thread, "async": e.async_op, "native": e.native, "completed": e.completed,
        "error": e.error,
    }
    if e.chain:  # the user's frames, outermost first (the site last)
        out["chain"] = [{"file": x[0], "line": x[1], "function": x[2]} if x else None for x in e.chain]
    if e.splits is not None:
        out["splits"] = {"input": list(e.splits[0]), "output": list(e.splits[1])}
    return out


def finding_dict(f, run=None) -> dict:
    return {
        "kind": f.kind, "title": f.title, "severity": f.severity, "group": f.group,
        "group_label": group_label(run, f.group) if run is not None else f"group {f.group}", "position": f.number,
        "ranks": f.ranks, "message": f.message,
        "events": {str(r): event_dict(e) for r, e in sorted(f.events.items())},
        "expected": event_dict(f.expected),
        "consequence": {"nccl": f.nccl, "gloo": f.gloo}, "fix": f.fix,
        "details": _plain(f.details),
    }


def _plain(x):
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def to_dict(report) -> dict:
    run = report.run
    return {
        "collcheck_json": JSON_VERSION,
        "run": run.directory, "world": run.world, "verdict": report.verdict, "aborted": report.aborted,
        "snapshot": {"running": run.running} if run.running else None,
        "ranks": {str(r): {"state": s.state, "detail": s.detail,
                           "collectives": len(run.ranks[r]) if r in run.ranks else 0,
                           "blocked_in": [event_dict(e) for e in s.blocked[:3]], "queued_behind": len(s.queued)}
                  for r, s in sorted(report.hang.states.items())},
        "groups": {name: {"members": list(run.group_members(name)), "collectives": n, "label": group_label(run, name)}
                   for name, n in report.counts.items()},
        "findings": [finding_dict(f, run) for f in report.findings],
        "wait_for": [[a, b, d.get("group")] for a, b, d in report.hang.graph.edges(data=True)],
        "cycles": report.hang.cycles, "root_causes": report.hang.root_causes,
        "warnings": run.warnings, "unchecked": run.unchecked,
    }


def render(report, out) -> None:
    json.dump(to_dict(report), out, indent=1)
    out.write("\n")
