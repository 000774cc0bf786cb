"""A text stream that cannot pass a CI workflow command on.

CI runners act on lines of a job's output: GitHub Actions runs `::add-mask::`, `::error ...::`
and the like when a line starts with `::` (blanks before it ignored). The text reports print
strings from the logs, escaped onto one line each, but a cell or a title wrapped at the
terminal's width, or a message that keeps its own line breaks, may still start a line with
`::` from a log. `CommandGuard` writes such a line with its first colon as `\\x3a`, the way
`collcheck.base.untrusted` shows a character it will not print; nothing else changes.
"""

from __future__ import annotations


def guard_lines(text: str) -> str:
    """`text` with each line that would read as a workflow command defused."""
    if "::" not in text:  # the usual case: nothing to look at
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        start = len(line) - len(line.lstrip())
        if line.startswith("::", start):
            lines[i] = line[:start] + "\\x3a" + line[start + 1:]
    return "\n".join(lines)


class CommandGuard:
    """Writes to `out` line by line through `guard_lines` (a line is written when it is complete,
    or on `flush`)."""

    def __init__(self, out):
        self.out = out
        self._partial = ""

    def write(self, text: str) -> int:
        data = self._partial + text
        cut = data.rfind("\n") + 1
        self._partial = data[cut:]
        if cut:
            self.out.write(guard_lines(data[:cut]))
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self.out.write(guard_lines(self._partial))
            self._partial = ""
        flush = getattr(self.out, "flush", None)
        if flush is not None:
            flush()

    def isatty(self) -> bool:
        return bool(getattr(self.out, "isatty", lambda: False)())

    @property
    def encoding(self) -> str:
        return getattr(self.out, "encoding", None) or "utf-8"
