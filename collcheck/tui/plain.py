"""The panes' renderables as plain data and back, so that the loader process words a pane and the
interface shows it: the same functions say the same things in both, nothing reworded here.

Only what the panes build crosses (rich Text, a Table of Texts, a Group of them): text, spans and
styles as strings, read back as Text (never as markup), styles parsed by rich (never eval)."""

from __future__ import annotations

import os

from rich.console import Group
from rich.style import Style
from rich.table import Table
from rich.text import Span, Text

__all__ = ["to_plain", "from_plain", "summary_facts"]


def _style(style) -> str:
    return style if isinstance(style, str) else str(style) if style else ""


def to_plain(renderable) -> dict:
    """A pane (Group, Table, Text) as builtins."""
    if isinstance(renderable, Text):
        return {"t": "text", "s": renderable.plain, "st": _style(renderable.style), "e": renderable.end,
                "sp": [[s.start, s.end, _style(s.style)] for s in renderable.spans]}
    if isinstance(renderable, Table):
        return {"t": "table", "title": renderable.title if isinstance(renderable.title, str) else None,
                "tj": renderable.title_justify, "edge": renderable.show_edge, "pad": renderable.pad_edge,
                "cols": [[c.header if isinstance(c.header, str) else "", c.overflow] for c in renderable.columns],
                "rows": [list(map(to_plain, cells)) for cells in zip(*(c.cells for c in renderable.columns))]}
    if isinstance(renderable, Group):
        return {"t": "group", "items": [to_plain(r) for r in renderable.renderables]}
    if isinstance(renderable, str):
        return to_plain(Text(renderable))
    raise TypeError(f"a pane holds a {type(renderable).__name__}: not carried between processes")


def _text(d: dict) -> Text:
    spans = [Span(int(a), int(b), Style.parse(s) if s else "") for a, b, s in d.get("sp", ())]
    return Text(str(d.get("s", "")), style=Style.parse(d["st"]) if d.get("st") else "", end=str(d.get("e", "\n")),
                spans=spans)


def from_plain(d: dict):
    """The renderable `to_plain` described."""
    kind = d.get("t")
    if kind == "text":
        return _text(d)
    if kind == "table":
        table = Table(title=d.get("title"), title_justify=d.get("tj", "center"), show_edge=bool(d.get("edge")),
                      pad_edge=bool(d.get("pad")))
        for header, overflow in d.get("cols", ()):
            table.add_column(header, overflow=overflow)
        for row in d.get("rows", ()):
            table.add_row(*map(from_plain, row))
        return table
    if kind == "group":
        return Group(*map(from_plain, d.get("items", ())))
    raise ValueError(f"not a pane: {kind!r}")


def summary_facts(report) -> dict:
    """What the summary line says of the run (the app words it): its name, ranks, verdict,
    findings and the ranks still running."""
    run = report.run
    return {"name": os.path.basename(os.path.normpath(run.directory)), "ranks": len(run.ranks),
            "verdict": report.verdict, "findings": len(report.findings), "running": sorted(run.running)}
