"""Reporters: one module per output format, each `render(report, out)`."""

FORMATS = ("text", "json", "junit", "github")
MESSAGE_CHARS = 1 << 16  # a finding's message shown whole up to this (it quotes strings from the logs)


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
