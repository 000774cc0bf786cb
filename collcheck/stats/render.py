"""The statistics as a table (rich) or JSON."""

from __future__ import annotations

import json
import os

from rich.console import Console
from rich.table import Table

from ..model import group_label, rank_ranges

STATS_JSON_VERSION = 1


def _site_text(s) -> str:
    return f"{os.path.basename(s.site[0])}:{s.site[1]} {s.site[2]}()" if s.site else "?"


def _fmt(x, unit: str = "", digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}{unit}"


def to_dict(run, sites, groups) -> dict:
    return {
        "collcheck_stats": STATS_JSON_VERSION, "run": run.directory, "world": run.world,
        "sites": [
            {"site": {"file": s.site[0], "line": s.site[1], "function": s.site[2]} if s.site else None,
             "api": s.api, "op": s.op, "group": s.group, "role": s.role, "ranks": s.ranks, "calls": s.calls,
             "bytes_per_call": s.bytes_per_call, "total_s": round(s.total_s, 6),
             "median_us": s.median_us, "p99_us": s.percentile_us(0.99),
             "algbw_mbs": s.bandwidth_mbs(len(run.group_members(s.group)))[0],
             "busbw_mbs": s.bandwidth_mbs(len(run.group_members(s.group)))[1]}
            for s in sites],
        "groups": {g.name: {"members": list(g.members), "calls": g.calls, "bytes": g.bytes,
                            "label": group_label(run, g.name)} for g in groups.values()},
    }


def render(run, sites, groups, fmt: str, out, top: int = 20) -> None:
    if fmt == "json":
        json.dump(to_dict(run, sites, groups), out, indent=1)
        out.write("\n")
        return
    console = Console(file=out, width=int(os.environ.get("COLUMNS", "120")), highlight=False, color_system=None)
    console.print(f"collcheck stats: {run.directory}  ({len(run.ranks)}/{run.world} ranks)")
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
