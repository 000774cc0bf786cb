"""Machine-readable report (schema version in JSON_VERSION; documented in docs/diff.md)."""

from __future__ import annotations

import json
import math

from ..base.guard import guarded
from ..base.untrusted import one_line
from ..knowledge.frameworks import split_chain
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
        view = split_chain(e.chain)
        if view.inner is not None:
            out["user_frame"] = {"file": view.inner[0], "line": view.inner[1], "function": view.inner[2]}
        if view.call is not None:
            out["framework"] = {"name": view.call.framework, "words": view.call.words, "call": view.call.user_api}
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
        "completion_poll_ms": run.poll_ms,
        "ranks": {str(r): {"state": s.state, "detail": s.detail, "host": run.host_of(r),
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
    render_launch(report, out)


def render_launch(report, out, launch: str | None = None, **_) -> None:
    """The JSON report of one run (`launch`: its id in a folder of several, kept as "launch")."""
    doc = to_dict(report)
    write_json(doc if launch is None else with_launch(doc, launch), out, indent=1)
    out.write("\n")


def with_launch(report_dict: dict, launch: str) -> dict:
    """A one-run JSON report (diff's or stats') with "launch" after its version key."""
    version, *rest = report_dict.items()
    return dict([version, ("launch", launch), *rest])


def write_json(obj, out, indent: int | None = None) -> None:
    """`obj` as strict JSON (RFC 8259), whatever values the logs put in it: a float that is not
    finite (nan, inf) becomes null, where `json.dump` would write `NaN`, which other parsers
    refuse; a value of a type JSON has no form for, or a key that is not a string, number or
    null, becomes its short `one_line` text. Strings need nothing: JSON escapes control
    characters, and `ensure_ascii` every other non-ASCII one (lone surrogates included). Written
    through the CI guard in its JSON form (base/guard.py): a reader gets the strings back whole."""
    try:
        text = json.dumps(obj, indent=indent, allow_nan=False)
    except (ValueError, TypeError):  # the rare hostile value: convert, then dump again
        text = json.dumps(_strict(obj), indent=indent, allow_nan=False)
    guarded(out, "json").write(text)


def _strict(x):
    if isinstance(x, dict):
        return {k if k.__class__ is str else _key(k): _strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_strict(v) for v in x]
    if x is None or x.__class__ in (str, bool):
        return x
    if x.__class__ is float:
        return x if math.isfinite(x) else None
    if x.__class__ is int:
        return x if x.bit_length() <= 4096 else f"<int of {x.bit_length()} bits>"  # str() refuses > 4300 digits
    return one_line(x, 200)


def _key(k) -> str:
    v = _strict(k)
    return v if v.__class__ is str else one_line(v, 200)
