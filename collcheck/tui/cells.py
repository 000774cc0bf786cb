"""A timeline cell's words: what one event is called in a cell of the width it has (no Textual:
the loader process words the first screen's cells with it too)."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size

from ..base.untrusted import one_line
from ..report import words

__all__ = ["STATUS", "cell_options", "fit", "cell_text"]

# status -> (glyph, style)
STATUS = {
    "matched": ("✓", "green"),
    "issued": ("•", "grey70"),  # past the group's first judged slot: not compared
    "mismatched": ("≠", "bold red"),
    "missing": ("✗", "bold red"),
    "extra": ("+", "bold yellow"),
    "pending": ("⧗", "bold magenta"),
    "failed": ("!", "bold magenta"),
    "after exit": ("·", "grey50"),
    "not issued": ("·", "grey50"),  # (a rank still running or stopped, not blamed here)
    "not member": (" ", "grey35"),
}


def cell_options(ev, status: str) -> list[str]:
    """A cell's texts, longest first: op, dtype[shape], purpose label and call site (file:line),
    with the status glyph first; on one line, escaped (the strings are the log's, and the timeline
    writes them to the terminal as they are). The shapes go first, then the op, then the site, so
    that the label stays whole as long as it can; the last is cut when nothing fits."""
    glyph = STATUS[status][0]
    if ev is None:
        return [{"missing": "✗ missing (never issued)", "after exit": "·", "not issued": "·",
                 "not member": ""}.get(status, glyph)]
    what, label = words.event_words(ev), words.event_label(ev)  # the report's words for the same event
    op = one_line(ev.sig.api or ev.sig.op)
    pending = " ⧗" if status == "mismatched" and not ev.completed else ""
    head = f"{glyph} {what}{pending}"
    site = f" · {words.event_site(ev)}" if ev.site else ""
    labelled = f" ({label})" if label else ""
    options = [head + labelled + site]
    if label:
        options += [f"{glyph} {op}{pending}{labelled}{site}", f"{glyph} {label}{site}", f"{glyph} {label}"]
    return options + [head + labelled]  # the last: as before, cut at the width


def fit(options: list[str], width: int | None = None) -> str:
    """The first of a cell's texts that fits in `width` cells, else the last cut with "…"."""
    if width is None:
        return options[0]
    fits = next((t for t in options if cell_len(t) <= width), None)
    return fits if fits is not None else set_cell_size(options[-1], width - 1) + "…"


def cell_text(ev, status: str, width: int | None = None) -> str:
    """The cell of an event (None: none at this row) with the status `status`, in `width` cells."""
    return fit(cell_options(ev, status), width)
