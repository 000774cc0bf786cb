"""The one place an output format is chosen: which formats each command has, and the reporter
that writes each (the commands' `--format` choices come from here too).

Every reporter follows one protocol (`Reporter`): `add` each result as it is ready (the one
run's; for a folder of several launches, each launch's, so a line is out before the next launch is
read), then `finish`; `counts` says what was added, for the exit code. A command never looks at
its format again: `reporter(command, fmt, out, ...)` and the protocol are all it needs. Renderer
modules are imported when their format is chosen, not before (rich, ElementTree).
"""

from __future__ import annotations

import importlib
from typing import Protocol

OUTCOMES = ("findings", "incomplete", "clean", "unreadable")


class Reporter(Protocol):
    counts: dict[str, int]

    def add(self, launch: str | None, world: int, result=None, error: str | None = None) -> None:
        """One run's result (`launch`: its id in a folder of several, None for a run alone), or why
        it could not be read (`error`)."""

    def finish(self) -> None:
        """After the last `add`."""


class One:
    """A reporter of one result, written whole by `render(result, out, launch=..., **options)`."""

    def __init__(self, render, out, **options):
        self.render, self.out, self.options = render, out, options
        self.counts = dict.fromkeys(OUTCOMES, 0)

    def add(self, launch: str | None, world: int, result=None, error: str | None = None) -> None:
        self.counts[outcome(result)] += 1
        self.render(result, self.out, launch=launch, **self.options)

    def finish(self) -> None:
        pass


def outcome(result) -> str:
    """'findings', 'incomplete', 'clean' or 'unreadable': what a result adds to the exit code."""
    if result is None:
        return "unreadable"
    findings = getattr(result, "findings", None)
    if findings:
        return "findings"
    return "incomplete" if getattr(result, "verdict", None) == "incomplete" else "clean"


def _lazy(module: str, name: str):
    """`report.<module>.<name>`, imported when first called."""
    def call(*args, **kwargs):
        return getattr(importlib.import_module(f"{__package__}.{module}"), name)(*args, **kwargs)
    return call


# command -> format -> (reporter of one run, reporter of several launches or None)
REPORTERS = {
    "diff": {
        "text": (_lazy("text", "render_launch"), _lazy("launches", "TextLaunches")),
        "json": (_lazy("json_report", "render_launch"), _lazy("launches", "JsonLaunches")),
        "junit": (_lazy("junit", "render_launch"), _lazy("launches", "JunitLaunches")),
        "github": (_lazy("github", "render_launch"), _lazy("launches", "GithubLaunches")),
    },
    "stats": {
        "text": (_lazy("stats", "render_text"), _lazy("launches", "TextStatsLaunches")),
        "json": (_lazy("stats", "render_json"), _lazy("launches", "JsonStatsLaunches")),
    },
    "lint": {
        "text": (_lazy("lint", "render_text"), None),
        "json": (_lazy("lint", "render_json"), None),
        "github": (_lazy("lint", "render_github"), None),
        "sarif": (_lazy("lint", "render_sarif"), None),
    },
    "replay": {
        "text": (_lazy("replay", "Printer"), None),
        "json": (_lazy("replay", "JsonPrinter"), None),
    },
    "export": {
        "perfetto": (_lazy("perfetto", "export"), None),
        "fr": (_lazy("fr_export", "export"), None),
    },
}


def formats(command: str) -> tuple[str, ...]:
    """The formats `command` writes, its default first."""
    return tuple(REPORTERS[command])


def reporter(command: str, fmt: str, out, where: str = "", ids: list[str] | None = None, **options) -> Reporter:
    """The reporter of `command`'s output in format `fmt` on `out`: of one run, or (`ids`: the ids of
    a folder's several launches, `where`: the folder) of each launch in turn."""
    one, several = REPORTERS[command][fmt]
    if ids is not None and len(ids) > 1:
        return several(out, where, ids, **options)
    return One(one, out, where=where, **options)


def printer(command: str, fmt: str, **options):
    """The live printer of a command that reports as it goes (`replay`): its lines and, in JSON,
    the document at the end."""
    return REPORTERS[command][fmt][0](**options)


def exporter(fmt: str):
    """`collcheck export`'s writer for `fmt`: `write(run, target, inputs) -> str` (what it wrote)."""
    return REPORTERS["export"][fmt][0]


def exports_folder(fmt: str) -> bool:
    """Whether `collcheck export` in `fmt` writes a folder (of dumps) rather than a file."""
    return fmt in EXPORT_FOLDERS


EXPORT_FOLDERS = frozenset({"fr"})
