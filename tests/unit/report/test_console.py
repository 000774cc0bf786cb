"""The one console of the text reports: its width rule, and that it never interprets what it prints."""

from __future__ import annotations

import ast
import fcntl
import io
import os
import struct
import termios
from pathlib import Path

import pytest

from collcheck.report.console import DEFAULT_WIDTH, make_console, width
from collcheck.report.replay import JsonPrinter, Printer

PACKAGE = Path(__file__).resolve().parents[3] / "collcheck"


@pytest.fixture
def terminal():
    """A pseudo-terminal 97 columns wide, as a text stream."""
    main, side = os.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 97, 0, 0))
    stream = os.fdopen(side, "w")
    yield stream
    stream.close()
    os.close(main)


def test_columns_then_the_terminal_then_the_default(monkeypatch, terminal):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert width(io.StringIO()) == DEFAULT_WIDTH == 120
    assert width(io.StringIO(), 140) == 140
    assert width(terminal) == 97
    monkeypatch.setenv("COLUMNS", "63")
    assert width(io.StringIO()) == width(terminal) == 63
    for bad in ("", "wide", "0", "-5"):
        monkeypatch.setenv("COLUMNS", bad)
        assert width(io.StringIO()) == 120 and width(terminal) == 97


def test_the_console_prints_text_as_it_is_and_passes_no_workflow_command(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console = make_console(out)
    console.print("[bold red]x[/] :smile: 1.5 0x1f http://a")
    console.print("::error::forged\n  ::add-mask::x")
    assert out.getvalue() == "[bold red]x[/] :smile: 1.5 0x1f http://a\n:\\x3aerror::forged\n  :\\x3aadd-mask::x\n"
    assert console.width == 120 and console.color_system is None


def test_plain_text_on_a_terminal_too(terminal, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    console = make_console(terminal)
    assert (console.width, console.color_system, console.is_terminal) == (97, None, False)


def test_replay_lines_go_through_the_console_unwrapped(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "20")
    long = "replay COMPLETED in 0.1 s: " + ", ".join(f"rank {r} exited 0" for r in range(8))
    Printer().line(long)
    JsonPrinter().line("::warning::x")
    captured = capsys.readouterr()
    assert captured.out == long + "\n" and captured.err == ":\\x3awarning::x\n"


def test_no_renderer_makes_a_console_of_its_own():
    """Every rich Console is made by report/console.py (the TUI draws with Textual)."""
    makers = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and (getattr(node.func, "id", None) == "Console"
                                               or getattr(node.func, "attr", None) == "Console"):
                makers.add(str(path.relative_to(PACKAGE)))
    assert makers == {"report/console.py"}
