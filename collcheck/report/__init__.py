"""Reporters: one module per output format, each `render(report, out)`."""

FORMATS = ("text", "json", "junit", "github")
MESSAGE_CHARS = 1 << 16  # a finding's message shown whole up to this (it quotes strings from the logs)
WARNINGS_SHOWN = 40  # a run's warnings shown one by one (one per group of 100,000 is possible); the rest counted


def shown_warnings(warnings: list[str]) -> tuple[list[str], str | None]:
    """The warnings a human report lists, and the line that counts the others (None: all listed)."""
    if len(warnings) <= WARNINGS_SHOWN:
        return warnings, None
    return warnings[:WARNINGS_SHOWN], f"... {len(warnings) - WARNINGS_SHOWN:,} more warnings (--format json for all)"


def render(report, fmt: str, out, context: int = 4) -> None:
    if fmt == "json":
        from .json_report import render as r
    elif fmt == "junit":
        from .junit import render as r
    elif fmt == "github":
        from .github import render as r
    else:
        from .text import render as r
        return r(report, out, context=context)
    return r(report, out)
