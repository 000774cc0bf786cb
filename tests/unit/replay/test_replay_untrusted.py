"""A replayed log is data from another machine: the script `replay --emit-script` writes
holds the log's strings as one data literal, never as code; the trampoline that gives a replayed
call its recorded site is bounded whatever the recorded line; and every entry point (`collcheck`,
`python -m collcheck`, live mode's judge) has one error path: bad input is one line and
exit 2, a bug one line and exit 3, never a traceback."""

from __future__ import annotations

import ast
import io
import json
import math
import os
import subprocess
import sys
import tokenize

import pytest

from collcheck import synth
from collcheck.base.errors import UsageError, run_command
from collcheck.logfile.reader import LogError
from collcheck.replay import minimize, runtime
from collcheck.cli import main as cli_main
from collcheck.report.replay import Printer, key_text
from collcheck.replay.plan import Plan
from support.logbytes import small_program

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MARK = "ZQX"  # in every hostile string: where it shows in the script, log text is there


def hostile(marker_dir) -> list[str]:
    """Strings a crafted (or a Windows) log may hold; the first would create `marker_dir`/pwned if
    it ran as code."""
    code = f"import os; os.mkdir({str(marker_dir / 'pwned')!r})"
    return [f'"""\n{code}\n"""{MARK}', f"'''\n{code}\n'''{MARK}", f"C:\\Users\\{MARK}\\train.py",
            f"ends in a backslash {MARK}\\", f"line\nbreak\r\n{MARK}", f"\x1b]0;title\x07\u202e{MARK}\U0001F600\udc80\x00",
            f"}}{{0}} # {MARK} {{world}}", f"\\N{{BULLET}} \\u00e9 {MARK} \\x1b"]


def hostile_plan(strings: list[str]) -> Plan:
    """One rank whose group names, descriptions, call sites, labels, tag, reduce op and end message
    are hostile; a run folder named with them; a line number of 2e9."""
    s = strings
    acts = [{"k": "new", "ranks": [0], "desc": s[1], "name": s[0], "s": [s[2], 3, s[3]]}]
    for n, text in enumerate(s):
        acts.append({"k": "op", "i": n, "op": "allreduce_", "g": s[0], "t": [["float32", [4]]], "tag": float("inf"),
                     "r": float("nan"), "label": text, "role": text, "api": text,
                     "s": [text, 2_000_000_000 if n == 0 else n + 1, text]})
    acts.append({"k": "end", "state": "raised", "m": s[-1] + s[0]})
    return Plan(1, [acts], [3], 2.0, [f"note {text}" for text in s], source="/runs/" + s[0])


def _plain(value):
    """A JSON document compared as text: NaN is equal to itself there."""
    return json.dumps(value, sort_keys=True)


def test_an_emitted_script_holds_hostile_log_strings_as_one_data_literal(tmp_path):
    strings = hostile(tmp_path)
    plan = hostile_plan(strings)
    finding = "Recorded first finding: " + " ".join(strings)
    script = tmp_path / "repro.py"
    minimize.emit_script(plan, str(script), finding)
    text = script.read_text(encoding="utf-8")
    tree = ast.parse(text)  # a backslash, a quote or a line break in a name cannot break the program

    # log text in one string constant only: the data literal (not the docstring, not a comment, not code)
    holders = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and MARK in n.value]
    assert len(holders) == 1, [h.value[:80] for h in holders]
    literal = holders[0]
    assert ast.get_docstring(tree) is not None and MARK not in ast.get_docstring(tree)
    comments = [t.string for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    assert comments and not [c for c in comments if MARK in c]
    lines = text.splitlines(keepends=True)
    start = sum(len(x) for x in lines[:literal.lineno - 1]) + literal.col_offset
    end = sum(len(x) for x in lines[:literal.end_lineno - 1]) + literal.end_col_offset
    assert MARK not in text[:start] + text[end:]

    # the data round-trips exactly: inf and nan included, Windows backslashes, surrogates, NUL
    data = json.loads(literal.value)
    assert _plain(data["plan"]) == _plain(json.loads(json.dumps(plan.to_json())))
    assert data["finding"] == finding and data["plan"]["source"] == "/runs/" + strings[0]
    op = data["plan"]["ranks"][0][1]
    assert op["g"] == strings[0] and op["tag"] == math.inf and math.isnan(op["r"])
    assert op["s"] == [strings[0], 2_000_000_000, strings[0]]
    assert data["plan"]["ranks"][0][0]["s"] == [strings[2], 3, strings[3]]

    # the module's top level runs (everything but main) without running any of it
    namespace = {"__name__": "repro_under_test"}
    exec(compile(text, str(script), "exec"), namespace)
    assert _plain(namespace["PLAN"]) == _plain(data["plan"])
    assert not (tmp_path / "pwned").exists()


def test_a_script_that_does_not_parse_is_never_written(tmp_path, monkeypatch):
    plan = hostile_plan(hostile(tmp_path))
    real = minimize.script_text
    monkeypatch.setattr(minimize, "script_text", lambda *a: (real(*a)[0] + '\n"""\n', real(*a)[1]))
    with pytest.raises(RuntimeError, match="does not parse"):
        minimize.emit_script(plan, str(tmp_path / "repro.py"))
    assert not (tmp_path / "repro.py").exists()
    monkeypatch.setattr(minimize, "script_text", lambda *a: (real(*a)[0], real(*a)[1] + " "))
    with pytest.raises(RuntimeError, match="one literal"):
        minimize.emit_script(plan, str(tmp_path / "repro.py"))
    assert not (tmp_path / "repro.py").exists()


def test_the_script_name_in_the_docstring_cannot_end_it(tmp_path):
    text, _ = minimize.script_text(hostile_plan(hostile(tmp_path)), 'repro"""; import os\\.py')
    tree = ast.parse(text)
    assert 'repro"""; import os\\.py' in ast.get_docstring(tree)
    assert [type(n).__name__ for n in tree.body[:2]] == ["Expr", "Import"]  # the docstring, then `import json`


def _probe(seen):
    def probe():
        f = sys._getframe(1)
        seen.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
    return probe


def test_a_huge_recorded_line_is_set_in_constant_time_and_memory():
    """The trampoline's line is the code object's first line, not newlines of padding: a line of 2e9
    is instant under a 600 MB address-space limit (padding would build a 2 GB string)."""
    code = ("import resource, sys, time\n"
            "resource.setrlimit(resource.RLIMIT_AS, (600 << 20, 600 << 20))\n"
            "from collcheck.replay import runtime\n"
            "seen = []\n"
            "def probe():\n"
            "    f = sys._getframe(1)\n"
            "    seen.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))\n"
            "t0 = time.monotonic()\n"
            "runtime.trampoline('/w/train.py', 'step', 2_000_000_000)(probe)\n"
            "runtime.trampoline('/w/train.py', 'step', 2**31 - 1)(probe)\n"
            "assert time.monotonic() - t0 < 1.0, time.monotonic() - t0\n"
            "print(seen)\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str([("/w/train.py", 2_000_000_000, "step"), ("/w/train.py", 2**31 - 1, "step")])


@pytest.mark.parametrize("line", [2**31, 2**40, 0, -5, "7", 7.0, True, None, [3]])
def test_a_recorded_line_out_of_range_or_not_an_integer_reads_as_line_1(line):
    seen = []
    runtime.trampoline("/w/train.py", "step", line)(_probe(seen))
    assert seen == [("/w/train.py", 1, "step")]


def test_hostile_file_and_function_names_are_code_attributes_only(tmp_path):
    seen = []
    for text in hostile(tmp_path):
        runtime.trampoline(text, text, 5)(_probe(seen))
        runtime.trampoline(text, text, 6, with_self=True)(object(), _probe(seen))
    assert seen == [(t, n, t) for t in hostile(tmp_path) for n in (5, 6)]
    seen.clear()
    runtime.trampoline(None, {"not": "a name"}, 9)(_probe(seen))
    assert seen == [("?", 9, "?")] and not (tmp_path / "pwned").exists()


# -- one error path ------------------------------------------------------------------------------


def _one_line(err: str, prefix: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("exc, code, prefix", [
    (LogError("a.msgpack: damaged\n\x1b[2J"), 2, "collcheck: error: "),
    (UsageError("--ranks 9\rforged: no such rank"), 2, "collcheck: error: "),
    (ValueError("a bug\nsecond line \x1b]8;;x\x07"), 3, "collcheck: internal error: ValueError: "),
    (KeyboardInterrupt(), 2, None),
    (BrokenPipeError(), 0, None),
])
def test_run_command_maps_every_exception_to_one_escaped_line_and_an_exit_code(exc, code, prefix, capsys, monkeypatch):
    monkeypatch.delenv("COLLCHECK_DEBUG", raising=False)

    def command():
        raise exc

    assert run_command(command) == code
    err = capsys.readouterr().err
    if prefix is None:
        assert err == ""
    else:
        line = _one_line(err, prefix)
        assert "\x1b" not in line and "\r" not in line


def test_collcheck_debug_shows_the_traceback_of_a_bug(monkeypatch):
    monkeypatch.setenv("COLLCHECK_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_command(lambda: 1 / 0)


def _run_module(*argv, timeout=60):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.path.join(ROOT, "tests"))
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, env=env)


def test_python_m_collcheck_replay_bad_input_is_one_line_and_exit_2(tmp_path):
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "rank-00000.0.msgpack").write_bytes(b"\x93\x01\x02" * 300)
    synth.write_run(str(tmp_path / "run"), small_program(2))
    for argv in ([tmp_path / "missing"], [garbage], [tmp_path / "run", "--emit-script", tmp_path / "no" / "r.py"]):
        proc = _run_module("-m", "collcheck", "replay", *map(str, argv))
        assert proc.returncode == 2, proc.stderr
        _one_line(proc.stderr, "collcheck: error: ")


def test_python_m_collcheck_replay_reports_a_bug_in_one_line(tmp_path, capsys, monkeypatch):
    from collcheck.cli import replay as cli

    def broken(args):
        raise KeyError("a bug")

    monkeypatch.delenv("COLLCHECK_DEBUG", raising=False)
    monkeypatch.setattr(cli, "execute", broken)
    assert cli_main(["replay", str(tmp_path)]) == 3
    _one_line(capsys.readouterr().err, "collcheck: internal error: KeyError")


@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_emit_script_where_it_cannot_be_written_is_exit_2_before_the_replay(tmp_path, capsys, where):
    synth.write_run(str(tmp_path / "run"), small_program(2))
    target = tmp_path / "nowhere" / "repro.py" if where == "missing folder" else tmp_path
    assert cli_main(["replay", str(tmp_path / "run"), "--emit-script", str(target)]) == 2
    captured = capsys.readouterr()
    assert "replaying" not in captured.out  # refused before any process started
    _one_line(captured.err, "collcheck: error: cannot write ")


def test_live_judge_usage_and_input_errors_are_one_line_and_exit_2(tmp_path, capsys):
    from collcheck.cli.live import main as live_main

    for argv in ([], [str(tmp_path / "missing")], [str(tmp_path), "extra"]):
        assert live_main(argv) == 2
        _one_line(capsys.readouterr().err, "collcheck live: error: ")


def test_live_judge_escapes_the_log_strings_it_reports(tmp_path, capsys):
    from collcheck.cli.live import judge
    from collcheck.report.live import REPORT_NAME
    from support import runs

    evil = "g\x1b]8;;http://x\x07\nforged line"
    runs.write(str(tmp_path), {"0": (0, 1), evil: (0, 1)},
               {0: [runs.Call(group=evil, size=4)], 1: [runs.Call(group=evil, size=8)]})
    line = judge(str(tmp_path), {"kind": "divergence"})
    assert line is not None and "\x1b" not in line and "\n" not in line and "g\\x1b]8;;http://x\\x07" in line
    report = (tmp_path / (REPORT_NAME + ".txt")).read_text()
    assert "\x1b" not in report and "\x07" not in report and "\x1b" not in capsys.readouterr().err


def test_replay_progress_lines_escape_log_strings(capsys):
    key = ("shape_mismatch", "g\x1b[31m\nrank 9: forged", 3, (0, 1))
    text = key_text(key)
    assert "\x1b" not in text and "\n" not in text and "g\\x1b[31m\\nrank 9: forged" in text
    Printer().line("collcheck replay: /runs/\x1b]0;x\x07")
    assert capsys.readouterr().out == "collcheck replay: /runs/\\x1b]0;x\\x07\n"
