"""Reporters: one module per output format; which formats each command has, and who writes each,
is chosen in formats.py alone."""

LAUNCH_CHARS = 200  # a launch id shown at most (a run id is a string from the logs)
MESSAGE_CHARS = 1 << 16  # a finding's message shown whole up to this (it quotes strings from the logs)
WARNINGS_SHOWN = 40  # a run's warnings shown one by one (one per group of 100,000 is possible); the rest counted


def shown_warnings(warnings: list[str]) -> tuple[list[str], str | None]:
    """The warnings a human report lists, and the line that counts the others (None: all listed)."""
    if len(warnings) <= WARNINGS_SHOWN:
        return warnings, None
    return warnings[:WARNINGS_SHOWN], f"... {len(warnings) - WARNINGS_SHOWN:,} more warnings (--format json for all)"


def render(report, fmt: str, out, context: int = 4) -> None:
    """`collcheck diff`'s report of one run in format `fmt` (formats.py chooses who writes it)."""
    from .formats import reporter

    r = reporter("diff", fmt, out, context=context)
    r.add(None, report.run.world, report)
    r.finish()
