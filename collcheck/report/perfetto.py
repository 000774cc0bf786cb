"""A run as a Chrome / Perfetto trace (JSON, opens in ui.perfetto.dev or chrome://tracing): one
process per rank, one track per group, one slice per collective from issue to completion (the
durations `collcheck stats` adds up), flows linking the slices that stand in the same slot of a
group on every rank, findings as instant events. With the run's statistics, each slice also
carries its bytes and how long this rank waited in it for the last member to
issue it, and a `steps` track per rank shows its training steps.

Trace Event Format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
"""

from __future__ import annotations

from itertools import pairwise

from ..knowledge import sites
from ..model import P2P_OPS
from .json_report import write_json

MIN_DUR_US = 1  # a slice of 0 µs is invisible in the UI


def trace(report, stats=None) -> dict:
    """The trace of `report` (analysis.diff.Report) as the JSON object Perfetto reads; `stats`
    (stats.summary.Stats of the same run) adds what `collcheck stats` knows of each slice."""
    run = report.run
    events: list[dict] = []
    slices: dict[tuple[str, int], list[tuple[int, int, int]]] = {}  # (group, slot) -> [(pid, tid, ts)]
    for rank, log in sorted(run.ranks.items()):
        events.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0, "args": {"sort_index": rank}})
        tracks: dict[str, int] = {}  # group -> its track (thread id) in this rank's process
        rank_events = stats.events[rank] if stats is not None else log.events()
        for e in rank_events:
            tid = tracks.get(e.group)
            if tid is None:
                tid = tracks[e.group] = len(tracks) + 1
                events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid,
                               "args": {"name": f"group {e.group}"}})
            end = e.t_done if e.t_done is not None else e.t_return
            dur = max(MIN_DUR_US, (end - e.t_issue) if end is not None else MIN_DUR_US)
            args = {"group": e.group, "position": e.position, "op": e.sig.op, "completed": e.completed}
            if e.site is not None:
                args["site"] = sites.full(e.site)
            if e.label:
                args["label"] = e.label
            if e.error:
                args["error"] = e.error
            if end is None:
                args["note"] = "never completed: the slice marks its issue"
            if stats is not None:
                args.update(_stats_args(stats, rank, e))
            events.append({"ph": "X", "name": e.sig.describe(), "cat": "collective", "pid": rank, "tid": tid,
                           "ts": e.t_issue, "dur": dur, "args": args})
            if e.sig.op not in P2P_OPS:
                slices.setdefault((e.group, e.position), []).append((rank, tid, e.t_issue))
    events += _flows(slices)
    events += _findings(report)
    if stats is not None:
        events += _steps(run)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"source": getattr(run, "source", "collcheck"), "run": run.directory}}


def _stats_args(stats, rank: int, e) -> dict:
    args = {"bytes": e.sized.nbytes}
    waited = stats.skew.waited_us(e.group, e.position, rank, e.t_issue)
    if waited is not None:
        args["waited_for_last_us"] = round(waited)
    return args


def _steps(run) -> list[dict]:
    """A `steps` track per rank: one slice from each optimizer step to the next (its first optimizer's)."""
    out = []
    for rank, log in sorted(run.ranks.items()):
        bounds = [log.base_us + ts for ts, opt in log.steps if opt == 0]
        if len(bounds) < 2:
            continue
        out.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": 0, "args": {"name": "steps"}})
        out += [{"ph": "X", "name": f"step {k + 1}", "cat": "step", "pid": rank, "tid": 0, "ts": a,
                 "dur": max(MIN_DUR_US, b - a)} for k, (a, b) in enumerate(pairwise(bounds))]
    return out


def _flows(slices) -> list[dict]:
    """One flow per matched slot: from the earliest issue to every other member's slice."""
    out = []
    for n, ((group, slot), members) in enumerate(sorted(slices.items())):
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[2])
        first = members[0]
        name = f"group {group} #{slot}"
        out.append({"ph": "s", "id": n, "name": name, "cat": "match", "pid": first[0], "tid": first[1],
                    "ts": first[2]})
        for k, (pid, tid, ts) in enumerate(members[1:], 2):
            out.append({"ph": "f" if k == len(members) else "t", "bp": "e", "id": n, "name": name, "cat": "match",
                        "pid": pid, "tid": tid, "ts": ts})
    return out


def _findings(report) -> list[dict]:
    out = []
    for f in report.findings:
        ts = min((e.t_issue for e in f.events.values() if e is not None), default=getattr(f, "time", 0) or 0)
        out.append({"ph": "i", "s": "g", "name": f"{f.kind}: {f.title}", "cat": "finding", "pid": min(f.ranks, default=0),
                    "tid": 0, "ts": ts, "args": {"group": f.group, "position": f.number, "ranks": list(f.ranks),
                                                  "message": f.message}})
    return out


def write(report, out, stats=None) -> None:
    write_json(trace(report, stats), out)  # strict JSON whatever numbers the logs hold


def export(run, target: str, inputs) -> str:
    """`collcheck export --format perfetto`: the run's trace, with its findings and statistics, as
    the file `target`; what to tell the user."""
    from ..analysis.diff import analyse
    from ..base.outputs import atomic_output
    from ..stats.summary import compute

    with atomic_output(target, inputs=inputs) as out:
        write(analyse(run), out, compute(run))
    return f"wrote {target}: open it in https://ui.perfetto.dev"
