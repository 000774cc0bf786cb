"""Every renderer on a run whose every string is hostile: terminal escapes, OSC 8
links, carriage returns, bells, bidi overrides, rich markup, newlines that would start CI
workflow commands. Logs come from other machines: what they hold is shown, never acted on.

Each output must be inert (no ESC, BEL, CR, C1 or bidi character; no line a CI runner would
read as a command), show markup literally, and end with a findings exit code (never 3)."""

from __future__ import annotations

import io
import json
import os
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
from rich.text import Text
from support.ci import runner_commands
from support.cli import run_cli
from support.tui import drive, plain

from collcheck.logfile import format as lf
from collcheck.logfile.writer import LogWriter, open_exclusive
from collcheck.report import github
from collcheck.base.guard import CommandGuard, guard_lines
from collcheck.report.json_report import write_json

MARKUP = "[/x] [link=http://evil]x[/link] [bold]B"
EVIL = f"\x1b[31mRED\x1b[0m \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ cr\rbel\x07 rtl\u202e csi\x9b {MARKUP}"
INJECT = "\n::add-mask::x,y:z ##[add-mask]w ##vso[task.setvariable variable=v]1"  # a line break, then CI commands
# a run folder's name: no "/" in it (the path would nest), the rest as hostile
DIR_NAME = "run\x1b[31m\x1b]8;;x\x07\r\u202e[bold]B[red]\n::warning::dir"
FORBIDDEN = ("\x1b", "\x07", "\r", "\x9b", "\u202e")
OK_CODES = (0, 1, 4)


def _write_hostile_run(directory: str) -> None:
    """Two ranks: a size mismatch in a group whose name, description, call sites, thread,
    label, role, host, error and exception are all EVIL; rank 1 fails there, then is stuck
    (watchdog stacks) and raises; rank 0 finishes."""
    world, bad_group = 2, "g" + EVIL + INJECT
    groups = {"0": [0, 1], bad_group: [0, 1]}
    path, func = "/job/" + EVIL + INJECT + ".py", "fn" + EVIL
    for rank in range(world):
        fd, log_path = open_exclusive(directory, f"rank-{rank:05d}.0")
        w = LogWriter(fd, log_path)
        with w.lock:
            w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": rank, "world": world,
                     "run": "run" + EVIL, "launch": "l" + EVIL, "restart": 0, "host": "host" + EVIL,
                     "pid": 20000 + rank, "backend": "cpu:gloo", "torch": "t" + EVIL,
                     "wall_ns": 1_700_000_000_000_000_000, "mono_ns": 0})
            gids: dict[str, int] = {}
            for name, members in groups.items():
                gids[name] = len(gids)
                w.queue({"k": lf.GROUP, "op": "seen", "gid": gids[name], "g": name, "d": "desc" + EVIL, "r": members})
                w.write({"k": lf.GROUP, "op": "init" if name == "0" else "new", "ts": 0, "r": members, "m": True,
                         "gid": gids[name], "g": name})
            w.queue({"k": lf.THREAD, "h": 0, "n": "thread" + EVIL, "id": 1})
            plan = [(bad_group, 4), (bad_group, 4 if rank == 0 else 8), ("0", 4)]
            seqs: dict = {}
            for n, (g, size) in enumerate(plan):
                ts = 100 * (n + 1)
                key = lf.seq_key(gids[g], "allreduce_", None)
                seqs[key] = j = seqs.get(key, -1) + 1
                site = w.site_id(path, 10 + n, func)
                chain = w.chain_id((w.site_id("/job/outer" + EVIL + ".py", 3, "outer" + EVIL), site))
                w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": gids[g], "ts": ts, "j": j, "s": site,
                         "ch": chain, "t": w.tspec_id((("float32", (size,)),)), "r": 0,
                         "u": w.string_id("role" + EVIL), "l": w.string_id("label" + EVIL)}, n)
                if rank == 1 and n == 1:
                    w.queue({"k": lf.DONE, "i": n, "r": ts + 5, "e": "error" + EVIL + INJECT})
                elif rank == 0 or n < 2:
                    w.queue({"k": lf.DONE, "i": n, "r": ts + 5, "c": ts + 40})
            if rank == 1:
                # printed at 60 columns, "watchdog: stuck 5 s in xx..x" fills the line: the command wraps to the next
                w.write({"k": lf.STACKS, "i": 2, "op": "x" * 32 + " ::set-output name=x::1", "waited_s": 5, "ts": 800,
                         "threads": []})
                frames = [[path, 12, func], ["/lib/" + EVIL, 1, "inner" + EVIL]]
                w.write({"k": lf.STACKS, "i": 2, "op": "allreduce_" + EVIL, "waited_s": 5, "ts": 900,
                         "threads": [{"id": 1, "n": "MainThread", "f": frames},
                                     {"id": 2, "n": "t" + EVIL + INJECT, "f": frames}]})
                w.write({"k": lf.EXCEPTION, "t": "RuntimeError" + EVIL, "m": "msg" + EVIL + INJECT, "ts": 1000,
                         "s": w.site_id(path, 12, func)})
            else:
                w.write({"k": lf.TRAILER, "ts": 1200})
        w.close()


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory):
    d = os.path.join(str(tmp_path_factory.mktemp("hostile")), DIR_NAME)
    os.makedirs(d)
    _write_hostile_run(d)
    return d


def assert_inert(text: str, what: str, ci: bool = True) -> None:
    """Nothing in `text` acts on a terminal, nor (`ci`: output a CI job may print) on a CI runner."""
    for ch in FORBIDDEN:
        assert ch not in text, f"{what}: raw {ch!r} in the output"
    if ci:
        assert runner_commands(text) == [], f"{what}: a CI runner reads commands in it"


def assert_markup_literal(text: str, what: str) -> None:
    assert "[/x]" in text and "[link=http://evil]x[/link]" in text and "[bold]B" in text, what
    assert "\\x1b[31mRED" in text, f"{what}: the escape is not shown visibly"


def strict_json(text: str):
    """json.loads that refuses NaN / Infinity, as other parsers do."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


# -- diff ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [250, 60])  # narrow: titles and cells wrap
def test_diff_text_shows_hostile_strings_literally(hostile_dir, columns):
    res = run_cli("diff", hostile_dir, columns=columns)
    assert res.code in OK_CODES, res.err
    assert_inert(res.out, "diff text")
    if columns == 250:
        assert_markup_literal(res.out, "diff text")
        assert "shape_mismatch" in res.out or "size mismatch" in res.out and "hang" in res.out


def test_diff_json_is_strict_json_holding_the_strings_as_they_are(hostile_dir):
    res = run_cli("diff", hostile_dir, "--format", "json")
    assert res.code in OK_CODES, res.err
    assert_inert(res.out, "diff json")
    report = strict_json(res.out)
    kinds = {f["kind"] for f in report["findings"]}
    assert "hang" in kinds and len(kinds) >= 2
    assert report["run"] == hostile_dir  # data keeps its value: JSON escapes it
    assert any(g.startswith("g" + EVIL) for g in report["groups"])
    # a number that is not finite (a time or size from a log) is null, not `NaN`
    from collcheck.analysis.diff import analyse
    from collcheck.model import load_run
    from collcheck.report import render

    analysed = analyse(load_run(hostile_dir))
    analysed.findings[0].details.update(waited=float("nan"), late=[float("inf")])
    out = io.StringIO()
    render(analysed, "json", out)
    assert strict_json(out.getvalue())["findings"][0]["details"]["late"] == [None]


def test_diff_junit_is_well_formed_xml(hostile_dir):
    res = run_cli("diff", hostile_dir, "--format", "junit")
    assert res.code in OK_CODES, res.err
    assert_inert(res.out, "diff junit")
    suite = ET.fromstring(res.out)
    failures = suite.findall(".//failure")
    assert len(failures) >= 2 and int(suite.get("failures")) == len(failures)
    assert any("[/x]" in (f.text or "") for f in failures)
    assert any("[/x]" in (c.get("name") or "") for c in suite.findall("testcase"))


def test_junit_forbidden_xml_characters_are_escaped(hostile_dir, monkeypatch):
    """Every character XML 1.0 forbids (C0 controls, U+FFFE/U+FFFF, lone surrogates) in a
    finding's texts still gives a document a parser reads."""
    from collcheck.analysis.diff import analyse
    from collcheck.model import load_run
    from collcheck.report import junit

    report = analyse(load_run(hostile_dir))
    nasty = "".join(map(chr, range(0x20))) + "\x7f\ufffe\uffff\ud800\udfff&<>\"'"
    for f in report.findings:
        f.message = nasty + f.message
    out = io.StringIO()
    junit.render(report, out)
    suite = ET.fromstring(out.getvalue())
    text = "".join(f.text or "" for f in suite.iter("failure"))
    assert "\\x00" in text and "\\ufffe" in text and "\\ud800" in text and "&<>" in text


def _github_lines(text: str) -> list[tuple[str, dict, str]]:
    out = []
    for line in text.rstrip("\n").split("\n"):
        assert line.startswith("::"), line[:80]
        head, sep, message = line[2:].partition("::")
        assert sep, line[:80]
        command, _, props = head.partition(" ")
        values = dict(p.split("=", 1) for p in props.split(",")) if props else {}
        out.append((command, values, message))
    return out


def test_diff_github_escapes_every_property(hostile_dir):
    res = run_cli("diff", hostile_dir, "--format", "github")
    assert res.code in OK_CODES, res.err
    assert_inert(res.out, "diff github", ci=False)  # its lines are commands: each checked below
    lines = _github_lines(res.out)
    assert len(lines) == 2 and {c for c, _, _ in lines} == {"error"}  # one line per finding, no injected one
    assert [c for c, _, _ in runner_commands(res.out)] == ["error", "error"]  # as the runner reads them
    for _, props, message in lines:
        assert set(props) <= {"file", "line", "title"} and "title" in props
        for name, value in props.items():
            assert not any(c in value for c in ":,\n\r"), (name, value)
        assert props.get("line", "1").isdigit()
        assert "\\n%3A%3Aadd-mask%3A%3Ax%2Cy%3Az ##[add-mask]w ##vso[task.setvariable variable=v]1.py" in props["file"]
        assert "[/x]" in props["title"]
        assert "\n" not in message and "\r" not in message


@pytest.mark.parametrize("line,shown", [(12, "12"), ("12", None), (True, None), (-3, None), (0, None),
                                        (2**40, None), (12.0, None)])
def test_github_line_numbers_are_validated_integers(monkeypatch, line, shown):
    monkeypatch.setattr(github, "group_label", lambda run, name: f"group {name}")
    ev = SimpleNamespace(site=("a,b:c.py", line, "f"))
    finding = SimpleNamespace(kind="missing", ranks=[0], events={0: ev}, expected=None, details={}, group="0",
                              number=1, message="m")
    out = io.StringIO()
    github.render(SimpleNamespace(findings=[finding], run=None), out)
    (_, props, _), = _github_lines(out.getvalue())
    assert props.get("line") == shown and props["file"] == "a%2Cb%3Ac.py"


# -- stats, show, export ---------------------------------------------------------------------------------


def test_stats_text_and_json(hostile_dir, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # stats sizes its tables to the terminal
    res = run_cli("stats", hostile_dir)
    assert res.code in OK_CODES, res.err
    assert_inert(res.out, "stats text")
    assert "[/x]" in res.out and "[link=http://evil]x[/link]" in res.out
    res = run_cli("stats", hostile_dir, "--format", "json")
    assert res.code in OK_CODES, res.err
    assert_inert(res.out, "stats json")
    strict_json(res.out)


def test_show_every_log(hostile_dir):
    for name in sorted(os.listdir(hostile_dir)):
        res = run_cli("show", os.path.join(hostile_dir, name), columns=200)
        assert res.code in OK_CODES, res.err
        assert_inert(res.out, f"show {name}")
        assert_markup_literal(res.out, f"show {name}")
        narrow = run_cli("show", os.path.join(hostile_dir, name), columns=60)  # lines wrap: none starts with ::
        assert_inert(narrow.out, f"show {name} at 60 columns")
    assert ":\\x3aset-output" in narrow.out  # (rank 1's log: the command that wrapped, defused)


def test_export_perfetto(hostile_dir, tmp_path, monkeypatch):
    from collcheck.report import perfetto

    stats_args = perfetto._stats_args  # and a time from the logs that is not finite
    monkeypatch.setattr(perfetto, "_stats_args", lambda *a: {**stats_args(*a), "waited_for_last_us": float("nan")})
    trace = tmp_path / "trace.json"
    res = run_cli("export", hostile_dir, "-o", str(trace))
    assert res.code in OK_CODES, res.err
    text = trace.read_text()
    assert_inert(text, "perfetto")
    assert strict_json(text)["traceEvents"]


def test_json_writer_is_strict_whatever_the_values():
    out = io.StringIO()
    write_json({"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": b"\x1b", (1, 2): {3}, "d": 10**5000},
               out)
    data = strict_json(out.getvalue())
    assert data["a"] is None and data["b"] == [None, None, 1.5] and "\x1b" not in json.dumps(data)


def test_command_guard_defuses_workflow_command_lines():
    assert guard_lines("ok\n  ::add-mask::x\n::error::y\nc10::Error") == "ok\n  :\\x3aadd-mask::x\n:\\x3aerror::y\nc10::Error"
    out = io.StringIO()
    g = CommandGuard(out)
    g.write("a\n:")
    g.write(":set-output name=x::1\n  ")
    g.write("::z")
    g.flush()
    assert out.getvalue() == "a\n:\\x3aset-output name=x::1\n  :\\x3az"


# -- the TUI ---------------------------------------------------------------------------------------------


def _strip_text(strip) -> str:
    return "".join(seg.text for seg in strip)


def test_tui_shows_hostile_strings_literally(hostile_dir):
    """Overview, timelines, detail, wait-for, stats, the status line and the group chooser mount
    and render (a `[/x]` read as markup raises), and show the strings as data."""
    seen: dict[str, str] = {}

    async def script(pilot, app):
        assert app.error is None
        seen["overview"] = plain(app, "#overview-text")
        seen["summary"] = plain(app, "#summary-line")
        await pilot.press("f", "d")
        await pilot.pause()
        for selector in ("#summary-line", "#status-line"):  # Textual reads a str as markup
            assert isinstance(app.query_one(selector).content, Text), selector
        seen["detail"] = plain(app, "#detail-text")
        seen["status"] = plain(app, "#status-line")
        tl = app.query_one("#timeline")
        seen["timeline"] = "\n".join(_strip_text(tl.render_line(y)) for y in range(6))
        await pilot.press("s")
        seen["steps"] = plain(app, "#steps")
        await pilot.press("w")
        seen["waitfor"] = plain(app, "#waitfor-text")
        await pilot.press("c")
        await app.workers.wait_for_complete()
        await pilot.pause()
        seen["stats"] = plain(app, "#stats-text")
        await pilot.press("g")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("q")

    app = drive(hostile_dir, script)
    assert app.error is None and app.return_code in (None, 0)
    for name, text in seen.items():
        assert_inert(text, f"tui {name}", ci=False)  # a terminal's screen, not a job's log
    for name in ("overview", "detail", "stats"):
        assert "[/x]" in seen[name] and "[link=http://evil]x[/link]" in seen[name], name
    assert "[bold]B[red]" in seen["summary"]  # the run folder's name
    assert "\\x1b" in seen["timeline"]  # the label, escaped, in the cell

