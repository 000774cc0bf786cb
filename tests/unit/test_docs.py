"""The user docs: no reference to the project's own bookkeeping, every measured figure next to the
command that reproduces it, every command they name exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "scenarios" / "README.md"]
# a measured figure: a time below a second, a size, a throughput, a ratio like 1.02x
FIGURE = re.compile(r"\d(?:[\d,.]*\d)?\s?(?:µs|ms|MB|GB|KB|bytes\b|events/s)|\d\.\d+x\b")
MEASURED_BY = re.compile(r"benchmarks/(?:bench_\w+|gpu_check)\.py")


def sections(path: Path):
    """(heading, text) per markdown section, the heading line included (it may name the command)."""
    heading, lines = path.name, []
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            yield heading, "\n".join(lines)
            heading, lines = f"{path.name}: {line.lstrip('#').strip()}", [line]
        else:
            lines.append(line)
    yield heading, "\n".join(lines)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_docs_speak_to_users_not_about_the_project(path):
    text = path.read_text()
    assert not re.search(r"closing note|project's issues|\bissues? #?\d+", text, re.I)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_measured_figure_comes_with_its_command(path):
    bare = [(heading, FIGURE.findall(text)) for heading, text in sections(path)
            if FIGURE.search(text) and not MEASURED_BY.search(text)]
    assert bare == []


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_commands_named_in_the_docs_exist(path):
    text = path.read_text()
    for script in set(MEASURED_BY.findall(text)):
        assert (ROOT / script).is_file(), script
    for module in set(re.findall(r"python -m (collcheck[\w.]*)", text)):
        parts = module.split(".")
        assert (ROOT.joinpath(*parts).with_suffix(".py").is_file()
                or ROOT.joinpath(*parts, "__main__.py").is_file()), module


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_tests_named_in_the_docs_exist(path):
    """A guarantee's test named in the docs (`tests/x.py`, `tests/x.py::name`, `::name` after it)
    is there: a renamed test cannot leave its guarantee unshown."""
    for line in path.read_text().splitlines():
        current = None
        for file, name in re.findall(r"`(tests/[\w/]+\.py)?(?:::(\w+))?", line):
            current = file or current
            if not current:
                continue
            source = (ROOT / current).read_text() if (ROOT / current).is_file() else None
            assert source is not None, current
            if name:
                assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{current}::{name}"
