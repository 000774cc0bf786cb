"""Pipeline schedules in their own terms: stages and microbatches.

A pipeline's stages pair their sends and recvs only while every stage runs the same number of
microbatches in a step; a stage that derives the count from its own data (a ragged last batch)
runs fewer or more, and the first unpaired message shows up between two neighbours that may both
be right. The recorder labels each send and recv of a schedule with its stage and the step's
microbatch count (knowledge/torch_internals/pipelining.py); here the counts of the ranks' last steps
are compared: the stage whose count differs from the others', or changed from its own earlier
steps, is the culprit of the first point-to-point finding.
"""

from __future__ import annotations

import re

from ..model import Run
from .findings import Finding

_STEP = re.compile(r"^pipeline (stages?) ([\d, ]+) of \d+, (\d+) microbatches")
WINDOW = 4096  # events read back from each rank's end


def _steps(run: Run, rank: int) -> tuple[str, int, int | None] | None:
    """(stage(s), microbatches of the rank's last pipeline step, microbatches of the step before
    that count, None: the same all along), read back from the end of the rank's log."""
    log = run.ranks[rank]
    last = stage = None
    for i in range(len(log) - 1, max(len(log) - WINDOW, 0) - 1, -1):
        m = _STEP.match(log.event(i).label or "")
        if m is None:
            continue
        n = int(m.group(3))
        if last is None:
            last, stage = n, f"{m.group(1)} {m.group(2)}"
        elif n != last:
            return stage, last, n
    return None if last is None else (stage, last, None)


def blame_microbatch_counts(run: Run, findings: list[Finding]) -> None:
    """The first point-to-point finding between pipeline stages that ran different numbers of
    microbatches in their last step is blamed on the stage(s) whose count differs."""
    f = next((f for f in findings if f.details.get("p2p") or f.kind == "unmatched_p2p"), None)
    if f is None or not any(_STEP.match(e.label or "") for e in f.events.values() if e is not None):
        return  # (not between pipeline stages: no rank's log is read back)
    steps = {r: s for r in sorted(run.ranks) if (s := _steps(run, r)) is not None}
    if len({s[1] for s in steps.values()}) < 2:
        return
    changed = [r for r, (_, n, before) in steps.items() if before is not None and before != n]
    if not changed or len(changed) == len(steps):
        by_count: dict[int, list[int]] = {}
        for r, (_, n, _) in steps.items():
            by_count.setdefault(n, []).append(r)
        smallest = min(map(len, by_count.values()))
        minority = [rs for rs in by_count.values() if len(rs) == smallest]
        changed = minority[0] if len(minority) == 1 else sorted(steps)
    f.ranks = sorted(changed)
    f.details["microbatches"] = {r: {"stage": s, "last": n, "before": b} for r, (s, n, b) in steps.items()}


def microbatch_text(details: dict) -> str:
    """'stage 0 (rank 0) ran 3 microbatches in its last step (4 before), stage 1 (rank 1) 4'."""
    parts = []
    for r, d in details["microbatches"].items():
        before = f" ({d['before']} before)" if d["before"] is not None else ""
        parts.append(f"{d['stage']} (rank {r}) {d['last']}{before}")
    return ("the pipeline's stages ran different numbers of microbatches in their last step: " + ", ".join(parts)
            + "; stages pair their sends and recvs microbatch by microbatch, so the messages of the microbatches "
            "one stage does not run are never sent or never received")
