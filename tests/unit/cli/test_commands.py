"""The command line as a package: one module per command, gathered by collcheck/cli/__init__.py, and
one error path (base/errors.run_command) for every entry point."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import collcheck.cli as cli
from collcheck import synth
from support.cli import run_cli
from support.logbytes import small_program

PACKAGE = Path(cli.__file__).resolve().parents[1]
NAMES = ["record", "show", "diff", "stats", "export", "tui", "replay", "lint", "demo", "build-fastpath"]


def test_one_module_per_command_in_the_order_of_the_help():
    modules = {p.stem for p in (PACKAGE / "cli").glob("*.py")} - {"__init__", "common", "values", "live"}
    assert {c.__name__.rsplit(".", 1)[1] for c in cli.COMMANDS} == modules
    assert [c.__name__.rsplit(".", 1)[1].replace("_", "-") for c in cli.COMMANDS] == NAMES
    res = run_cli("--help")
    assert res.code == 0 and "{" + ",".join(NAMES) + "}" in res.out


@pytest.mark.parametrize("name", NAMES)
def test_a_bug_in_any_command_is_one_line_and_exit_3(name, monkeypatch, tmp_path):
    module = importlib.import_module(f"collcheck.cli.{name.replace('-', '_')}")

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.delenv("COLLCHECK_DEBUG", raising=False)
    monkeypatch.setattr(module, "execute", broken)
    argv = {"record": ["--", "true"], "show": [tmp_path], "export": [tmp_path, "-o", tmp_path / "x"],
            "demo": [], "build-fastpath": ["--status"]}.get(name, [tmp_path])
    res = run_cli(name, *argv)
    assert (res.code, res.out) == (3, "")
    assert res.err == "collcheck: internal error: KeyError: 'a bug' (set COLLCHECK_DEBUG=1 for a traceback)\n"


def test_the_tui_reports_a_run_it_cannot_read_through_the_error_path(monkeypatch, tmp_path):
    from collcheck.base.errors import LogError
    from collcheck.tui import app

    def unreadable(target):
        raise LogError("x\x1b[2J: not a collcheck log")

    monkeypatch.setattr(app, "run_tui", unreadable)
    synth.write_run(str(tmp_path), small_program(2))  # a run: its launch is found before the TUI starts
    res = run_cli("tui", tmp_path)
    assert (res.code, res.err) == (2, "collcheck: error: x\\x1b[2J: not a collcheck log\n")


def test_only_the_entry_points_run_the_error_path():
    """`collcheck` (cli/__init__.py) and live mode's judge (cli/live.py) call run_command; a command
    raises, it never catches and prints an error itself."""
    callers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "run_command":
                callers.add(str(path.relative_to(PACKAGE)))
    assert callers == {"cli/__init__.py", "cli/live.py"}
