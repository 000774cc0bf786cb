"""Where things are in the grid: findings to rows and columns, search, group choices (no Textual)."""

from __future__ import annotations

import os

from ..model import group_label, rank_ranges
from .grid import Grid, finding_row

MERGED = "*"  # the group key of the merged view

__all__ = ["MERGED", "default_group", "marks", "locate", "finding_row", "group_choices", "search"]


def default_group(report, merged: str) -> str:
    """The group of the first finding, else the only group, else all groups merged."""
    names = report.run.group_names()
    f = report.first
    if f is not None and f.kind == "deadlock":  # the cycle spans groups
        return merged
    if f is not None and f.group in names:
        return f.group
    return names[0] if len(names) == 1 else merged


def marks(report, grid: Grid, current: int) -> tuple[dict, dict]:
    """Gutter marks (▶ selected finding, ◆ others) and culprit ranks per row."""
    out, culprits = {}, {}
    for i, f in enumerate(report.findings):
        row = finding_row(grid, f)
        if row is None:
            continue
        if i == current or row not in out:
            out[row] = "▶" if i == current else "◆"
        culprits.setdefault(row, set()).update(f.ranks)
    return out, culprits


def locate(report, group: str, f, grids: dict, merged: str):
    """(group to show, row or None, rank to select) for a finding."""
    names = report.run.group_names()
    target = group
    if group != merged and f.group in names and f.group != group:
        target = f.group
    rank = f.ranks[0] if f.ranks else None
    return target, None, rank


def group_choices(report, merged: str) -> list[tuple[str, str]]:
    run = report.run
    out = [(merged, "all groups, merged in issue order")]
    for g in run.group_names():
        members = run.group_members(g)
        out.append((g, f"{group_label(run, g)}: ranks {rank_ranges(members)} ({len(members)}), "
                       f"{report.counts.get(g, 0)} collectives"))
    return out


def _sig_hits(run, q: str) -> set[int]:
    return {i for i, s in enumerate(run.signatures)
            if q in s.op.lower() or q in (s.api or "").lower() or q in s.describe().lower()}


def _site_match(ev, q: str) -> bool:
    if ev is None:
        return False
    if ev.label and q in ev.label.lower():
        return True
    if ev.site is None:
        return False
    f, line, fn = ev.site
    return q in f"{os.path.basename(f)}:{line}".lower() or q in f.lower() or q == fn.lower() or q in fn.lower()


def search(grid: Grid, query: str, row: int, col: int, max_decode: int = 5000):
    """The next (row, column) after the cursor whose op matches, else whose call site / label does."""
    q = query.lower()
    n = len(grid)
    if not n:
        return None
    sigs = _sig_hits(grid.run, q)
    order = [(row + d) % n for d in range(1, n + 1)]
    if sigs:
        for r in order:
            for c, column in enumerate(grid.columns):
                if grid.sig(column.rep, r) in sigs:
                    return r, c
    sites = any(q in f"{os.path.basename(f)}:{line}".lower() or q in f.lower() or q in fn.lower()
                for f, line, fn in grid.run.sites)
    if not sites and not any(s.role for s in grid.run.signatures):
        return None
    decoded = 0
    for r in order:
        for c, column in enumerate(grid.columns[:8]):
            if grid.status(column.rep, r) in ("not member", "after exit", "not issued", "missing"):
                continue
            decoded += 1
            if _site_match(grid.event(column.rep, r), q):
                return r, c
        if decoded > max_decode:
            break
    return None
