"""Strings from logs and dumps are data from another machine: this is the one function that makes
them safe to show.

A log or Flight Recorder dump may come from anywhere (a CI artifact, a colleague's tarball), so a
file name, group name, thread name or exception text in it may hold terminal escape sequences,
carriage returns that overwrite what was printed, bidi overrides that reorder a line, or text
long enough to flood a screen. `visible` turns every such character into its Python escape
(`\\x1b`, `\\r`, `\\u202e`) and cuts long texts, so what is printed is what the file holds,
character for character, and nothing acts on the terminal. Markup (rich's `[bold]`, `[link=..]`)
is a renderer's concern: renderers print these strings as plain text (`rich.text.Text`,
`markup=False`), never as markup.

Standard library only: the readers of the log layer call it on every string they decode.
"""

from __future__ import annotations

MAX_TEXT = 4096  # characters of one string shown; longer ones are cut (a file of megabytes of name)

_KEEP = "\n\t"  # line breaks and tabs in exception texts and stacks: harmless, and needed to read them


_NAMED = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(value, limit: int = MAX_TEXT) -> str:
    """`value` (any type: a non-string is shown by its type's repr, cut) as text with every
    non-printable character but newline and tab escaped, at most `limit` characters (then `…`).

    Printable text (the usual case) is returned as it is, without a copy."""
    if value.__class__ is not str:
        value = _shown(value)
    if len(value) > limit:
        value = value[:limit] + "…"
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() or ch in _KEEP else _escape(ch) for ch in value)


def one_line(value, limit: int = MAX_TEXT) -> str:
    """`visible`, with newlines and tabs escaped too: for a table cell, a title, a CI annotation."""
    text = visible(value, limit)
    return text if text.isprintable() else text.replace("\t", "\\t").replace("\n", "\\n")


def _shown(value) -> str:
    """A short, bounded text for a value that should have been a string (never `str()` of a
    container: a dump's nested shared lists make that astronomically long)."""
    if value.__class__ is int and value.bit_length() > 200:  # repr() of a huge int is slow, or refused
        return f"<int of {value.bit_length()} bits>"
    if value is None or value.__class__ in (bool, int, float):
        text = repr(value)
        return text if len(text) <= 64 else text[:64] + "…"
    if value.__class__ is bytes:
        return repr(value[:64])
    return f"<{type(value).__name__}>"
