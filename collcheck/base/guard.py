"""The one guard of every stream a CI runner reads: no workflow command from a file's strings.

CI runners act on lines of a job's output. GitHub Actions runs a command for a line that starts
with `::` once leading blanks are trimmed (`::add-mask::`, `::error ...::`, `::stop-commands::`),
and, in its older syntax, for `##[command]` *anywhere* in a line; Azure Pipelines does the same
for `##vso[` anywhere (the runners' ActionCommand.TryParseV2 / TryParse). collcheck prints strings
it did not write (log and dump strings, linted file names, source text), escaped onto one line
each, but a path printed at a line start, a cell wrapped at the terminal's width or a message
that keeps its line breaks may still carry such a pattern.

`CommandGuard` wraps a stream and defuses each pattern where it forms, whatever the writes'
boundaries: the second colon of a line-start `::` and the bracket of `##[` / `##vso[` are
written escaped, in the notation of the stream's format (`\\x3a` in text, `\\u003a` in JSON,
`&#x3a;` in XML: a JSON or XML reader gets the original characters back, the runner never sees
the pattern). Nothing else changes. `command()` is the one way to write a workflow command on
purpose (`--format github`): its properties and message are escaped as GitHub documents. Every
entry point wraps stdout and stderr (base/errors.run_command); every output file is wrapped by
the format that writes it.

Standard library only: the error path below the command line uses it.
"""

from __future__ import annotations

import re

# A line start (the context always begins with "\n" or NUL, so `(?<=[\r\n])` sees the stream's
# start as one), blanks, then `::`: the second colon is escaped. The runner reads "\r" as a line
# break too.
_LINE_COMMAND = re.compile(r"(?<=[\r\n])\s*:(:)")
# `##[` or `##vso[` anywhere: the bracket is escaped.
_LEGACY_COMMAND = re.compile(r"##(?:vso)?(\[)")
_CONTEXT = 8  # characters of the current line kept to see a pattern split across writes

ESCAPES = {  # how each format writes a defused character, readable back by that format's reader
    "text": {":": "\\x3a", "[": "\\x5b"},
    "json": {":": "\\u003a", "[": "\\u005b"},
    "xml": {":": "&#x3a;", "[": "&#x5b;"},
}
def guard_lines(text: str, flavour: str = "text") -> str:
    """`text` (whole lines) with every workflow-command pattern defused."""
    if "::" not in text and "##" not in text:
        return text
    return _defuse("\n" + text, 1, ESCAPES[flavour])


def _defuse(data: str, start: int, escapes: dict) -> str:
    """data[start:] with the escaped characters of every pattern that ends at or after `start`
    (data[:start] is context already written)."""
    if "::" not in data and "##" not in data:
        return data[start:]
    cuts = []
    for pattern in (_LINE_COMMAND, _LEGACY_COMMAND):
        cuts += [m.start(1) for m in pattern.finditer(data) if m.start(1) >= start]
    if not cuts:
        return data[start:]
    pieces, last = [], start
    for i in sorted(set(cuts)):
        pieces += [data[last:i], escapes[data[i]]]
        last = i + 1
    pieces.append(data[last:])
    return "".join(pieces)


def escape_data(s: str) -> str:
    """A workflow command's message (after `::`)."""
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: str) -> str:
    """A workflow command's property value (`file=`, `line=`, `title=`)."""
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


class CommandGuard:
    """A text stream that writes to `out` with every workflow-command pattern defused (`flavour`:
    how a character is escaped, see ESCAPES). Other attributes are `out`'s."""

    def __init__(self, out, flavour: str = "text"):
        self.out = out
        self._escapes = ESCAPES[flavour]
        self._context = "\n"  # what the current line holds so far, as far as a pattern needs it

    def write(self, text: str) -> int:
        if not text:
            return 0
        written = _defuse(self._context + text, len(self._context), self._escapes)
        self.out.write(written)
        self._context = _context_after(self._context, written)
        return len(text)

    def command(self, name: str, message: str, **properties) -> None:
        """Write the workflow command `::name k=v,...::message` on a line of its own (properties
        whose value is None are left out), its values escaped as GitHub documents."""
        params = ",".join(f"{k}={escape_property(str(v))}" for k, v in properties.items() if v is not None)
        self.command_line(f"::{name}{' ' + params if params else ''}::{escape_data(message)}\n")

    def command_line(self, line: str) -> None:
        """A whole command line, written as it is (by the outermost of guards around guards), on a
        line of its own."""
        if self._context != "\n":  # (never glued to the end of another line)
            line = "\n" + line
        inner = getattr(self.out, "command_line", None)
        if inner is not None:
            inner(line)
        else:
            self.out.write(line)
        self._context = "\n"

    def flush(self) -> None:
        flush = getattr(self.out, "flush", None)
        if flush is not None:
            flush()

    def isatty(self) -> bool:
        return bool(getattr(self.out, "isatty", lambda: False)())

    @property
    def encoding(self) -> str:
        return getattr(self.out, "encoding", None) or "utf-8"

    def __getattr__(self, name):  # fileno, errors, closed, ...: the stream's own
        return getattr(self.out, name)


def guarded(out, flavour: str = "text") -> CommandGuard:
    """`out` behind a guard (itself when it is one already and `flavour` is text)."""
    return out if isinstance(out, CommandGuard) and flavour == "text" else CommandGuard(out, flavour)


def _context_after(context: str, written: str) -> str:
    """The context of the next write: "\n" and what follows the blanks of the current line when it
    holds only blanks and at most a colon so far; else NUL and the line's last characters."""
    cut = max(written.rfind("\n"), written.rfind("\r"))
    if cut >= 0:
        line = written[cut + 1:]
    elif context[0] == "\n":
        line = context[1:] + written
    else:
        return "\x00" + (context[1:] + written)[-_CONTEXT:]
    stripped = line.lstrip()
    return "\n" + stripped if stripped in ("", ":") else "\x00" + line[-_CONTEXT:]
