"""The statistics as a table (rich) or JSON."""

from __future__ import annotations

import json
import os
import statistics

from rich.console import Console
from rich.table import Table

from ..model import group_label, rank_ranges

STATS_JSON_VERSION = 1


def _site_text(s) -> str:
    return f"{os.path.basename(s.site[0])}:{s.site[1]} {s.site[2]}()" if s.site else "?"


def _fmt(x, unit: str = "", digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}{unit}"


def _site_dict(site) -> dict | None:
    return {"file": site[0], "line": site[1], "function": site[2]} if site else None


def _steps_dict(steps) -> dict | None:
    if steps is None:
        return None
    return {"count": steps.count, "wall_s": [round(x, 6) for x in steps.wall_s],
            "comm_s": [round(x, 6) for x in steps.comm_s], "share": round(steps.share, 4)}


def _site_row(run, s) -> dict:
    alg, bus = s.bandwidth_mbs(len(run.group_members(s.group)))
    return {"site": _site_dict(s.site), "api": s.api, "op": s.op, "group": s.group, "role": s.role, "ranks": s.ranks,
            "calls": s.calls, "bytes_per_call": s.bytes_per_call, "total_s": round(s.total_s, 6),
            "median_us": s.median_us, "p99_us": s.percentile_us(0.99), "algbw_mbs": alg, "busbw_mbs": bus}


def to_dict(run, sites, groups, skew, hints, steps=None) -> dict:
    return {
        "collcheck_stats": STATS_JSON_VERSION, "run": run.directory, "world": run.world,
        "steps": _steps_dict(steps),
        "hints": [{"kind": h.kind, "site": _site_dict(h.site), "gain_s": round(h.gain_s, 6), "text": h.text,
                   "evidence": h.evidence} for h in hints],
        "stragglers": [{"rank": s.rank, "wait_caused_s": round(s.wait_caused_us / 1e6, 6), "last_in": s.last_in,
                        "collectives": s.slots} for s in skew.stragglers],
        "clock_offsets_us": {str(r): o for r, o in sorted(skew.offsets_us.items())},
        "slots": [{"group": g, "position": p, "last": r, "waited_s": round(w / 1e6, 6)} for g, p, r, w, _ in skew.slots],
        "sites": [_site_row(run, s) for s in sites],
        "groups": {g.name: {"members": list(g.members), "calls": g.calls, "bytes": g.bytes,
                            "label": group_label(run, g.name)} for g in groups.values()},
    }


def render(run, sites, groups, skew, hints, fmt: str, out, top: int = 20, steps=None) -> None:
    if fmt == "json":
        json.dump(to_dict(run, sites, groups, skew, hints, steps), out, indent=1)
        out.write("\n")
        return
    console = Console(file=out, width=int(os.environ.get("COLUMNS", "120")), highlight=False, color_system=None)
    console.print(f"collcheck stats: {run.directory}  ({len(run.ranks)}/{run.world} ranks)")
    if steps is not None:
        wall, comm = statistics.median(steps.wall_s), statistics.median(steps.comm_s)
        console.print(f"steps (between optimizer steps): {steps.count}; per step {wall:.4f} s, {comm:.4f} s of it "
                      f"inside collectives ({100 * steps.share:.0f} %, medians)", markup=False)
    for i, h in enumerate(hints[:5]):
        console.print(f"hint {i + 1} ({h.kind}): {h.text}", markup=False)
    t = Table(title="time inside collectives, per call site (issue to completion; the rank that spent the most)")
    for col in ("call site", "op", "group", "ranks", "calls/rank", "bytes/call", "total (s)", "median (µs)",
                "p99 (µs)", "algbw (MB/s)", "busbw (MB/s)"):
        t.add_column(col, justify="left" if col in ("call site", "op", "group", "ranks") else "right")
    for s in sites[:top]:
        alg, bus = s.bandwidth_mbs(len(run.group_members(s.group)))
        op = s.api + (f" ({s.role})" if s.role else "")
        t.add_row(_site_text(s), op, s.group, rank_ranges(s.ranks), str(s.calls), str(s.bytes_per_call),
                  _fmt(s.total_s, digits=4), _fmt(s.median_us), _fmt(s.percentile_us(0.99)), _fmt(alg, digits=2),
                  _fmt(bus, digits=2))
    console.print(t)
    if len(sites) > top:
        console.print(f"... {len(sites) - top} more call sites (--top, or --format json for all)")
    g = Table(title="groups")
    for col in ("group", "members", "collectives/rank", "bytes/rank"):
        g.add_column(col)
    for gs in groups.values():
        g.add_row(group_label(run, gs.name), rank_ranges(gs.members) if gs.members else "?", str(gs.calls),
                  str(gs.bytes))
    console.print(g)
    if skew.slots:
        w = Table(title=f"stragglers: who came last to the {len(skew.slots)} collectives every member completed, "
                        "and the others' waiting for it")
        for col in ("rank", "waiting caused (s)", "came last", "clock offset (µs)"):
            w.add_column(col, justify="right")
        for st in skew.stragglers[:top]:
            w.add_row(str(st.rank), f"{st.wait_caused_us / 1e6:.4f}", f"{st.last_in}/{st.slots}",
                      f"{skew.offsets_us.get(st.rank, 0.0):.0f}")
        console.print(w)
