"""Command-line values are data (docs/security.md): whatever numbers, ranges and paths a user or a
script passes to replay, diff, stats, show, lint and export, the command ends with 0, 1, 2 or 4,
never 3 (a bug) and never after unbounded work. The real command line, in-process, on a small run
with a finding; the values come from hypothesis."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import examples
from support.cli import run_cli
from support.logbytes import small_program

from collcheck import synth

CODES = (0, 1, 2, 4)
NUMBERS = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e309", "1e300", "-0", "0", "1", "0x10", "1_000", "", " ", "\u0661\u0662",
                     "0.5", "1e-320", "9" * 400, "--", "4\x00"]),
)
RANGES = st.one_of(
    st.sampled_from(["all", "auto", "0", "0-1", "1-0", "0-100000000000", "-1", "a-b", ",,", "0,1,0-1", " 1 ", "1-",
                     "0-1-2", "99999999999999999999", "1,-3"]),
    st.text(alphabet="0123456789-,a ", max_size=20),
)
EDITS = st.one_of(
    st.sampled_from(["0:0", "1:2", "100000000000:1", "0:99999999999999999999999", "-1:-1", "0:1=1:0", "0:1:0",
                     "1:0=100000000000:0", ":", "0:0:0:0", ""]),
    st.text(alphabet="0123456789-:=", max_size=16),
)


@pytest.fixture(scope="module")
def where(tmp_path_factory):
    """A run with a finding, its parent, a script to lint, a FIFO, a link to the run, a folder of
    garbage: the paths the strategies pick from."""
    root = tmp_path_factory.mktemp("values")
    run = root / "run"
    synth.write_run(str(run), small_program(2), [synth.Fault("shape_mismatch", 1, 1)])
    (root / "train.py").write_text("import torch.distributed as dist\nif dist.get_rank() == 0:\n    dist.barrier()\n")
    os.mkfifo(root / "fifo")
    os.symlink(run, root / "link")
    (root / "junk").mkdir()
    (root / "junk" / "rank-00000.0.msgpack").write_bytes(b"\x00" * 100)
    (root / "out").mkdir()
    return root


def _paths(where, outputs: bool = False):
    """Paths to read from, or (`outputs`) to write to: never the run's own files, which later
    examples read (an output onto a command's input: test_cli_outputs.py)."""
    names = ["fifo", "/dev/null", "", "a\x00b", "x" * 5000, "missing", "junk", "link"]
    names += (["out/new.txt", "out", "run/report.json", "out/new.txt/below", "link/x", "junk/rank-00000.0.msgpack"]
              if outputs else ["run", "run/rank-00000.0.msgpack", ".", "train.py", "run/../run"])
    return st.sampled_from([n if n.startswith("/") or not n else str(where / n) for n in names])


def _run(*argv) -> None:
    res = run_cli(*argv)
    assert res.code in CODES, (argv, res.code, res.err[-500:])
    if res.code == 2:
        assert "Traceback" not in res.err and res.err.strip(), (argv, res.err)


VALUES = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@VALUES
@given(data=st.data())
def test_diff_stats_show_export_lint_take_any_value(where, data):
    run = str(where / "run")
    command = data.draw(st.sampled_from(["diff", "stats", "show", "export", "lint"]))
    if command == "diff":
        _run("diff", data.draw(_paths(where)), "--context", data.draw(NUMBERS),
             *data.draw(st.sampled_from([[], ["-o", data.draw(_paths(where, True))], ["--format", "json"]])))
    elif command == "stats":
        _run("stats", data.draw(_paths(where)), "--top", data.draw(NUMBERS))
    elif command == "show":
        _run("show", data.draw(st.sampled_from([run + "/rank-00000.0.msgpack", data.draw(_paths(where))])),
             "--limit", data.draw(NUMBERS))
    elif command == "export":
        _run("export", data.draw(st.sampled_from([run, data.draw(_paths(where))])), "-o", data.draw(_paths(where, True)),
             "--format", data.draw(st.sampled_from(["perfetto", "fr"])))
    else:
        _run("lint", data.draw(_paths(where)), *data.draw(st.sampled_from(
            [[], ["--logs", data.draw(_paths(where))], ["-o", data.draw(_paths(where, True))]])))


def _replay_argv(where, data, bad_only: bool) -> list[str]:
    """replay's arguments; `bad_only`: each option a value the command must refuse before any
    process starts (for the default run: a replay takes seconds)."""
    run = str(where / "run")
    if bad_only:
        bad = {"--timeout": ["nan", "inf", "-inf", "1e309", "1e300", "-1", "0", "", "x", "4\x00"],
               "--shrink": ["0", "-1", "0.5", "", "x", "9" * 400, "nan"],
               "--max-tests": ["-1", "0.5", "", "x", "9" * 400, "inf"]}
        option = data.draw(st.sampled_from(sorted(bad)))
        argv = ["replay", run, option, data.draw(st.sampled_from(bad[option]))]
        return argv + data.draw(st.sampled_from([[], ["--ranks", data.draw(RANGES)], ["--drop", data.draw(EDITS)]]))
    argv = ["replay", data.draw(st.sampled_from([run, run, data.draw(_paths(where))]))]
    for option, values in (("--timeout", st.one_of(NUMBERS, st.just("2"))), ("--shrink", NUMBERS),
                           ("--max-tests", NUMBERS), ("--ranks", RANGES), ("--drop", EDITS), ("--insert", EDITS),
                           ("--emit-script", _paths(where, True)), ("--keep", _paths(where, True))):
        if data.draw(st.booleans()):
            argv += [option, data.draw(values)]
    return argv + ["--timeout", "2", "--max-tests", "2"] * data.draw(st.booleans())


@VALUES
@given(data=st.data())
def test_replay_refuses_bad_values_before_it_starts(where, data):
    argv = _replay_argv(where, data, bad_only=True)
    res = run_cli(*argv)
    assert res.code == 2 and "Traceback" not in res.err, (argv, res.code, res.err[-500:])


@pytest.mark.slow
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_replay_takes_any_value(where, data):
    _run(*_replay_argv(where, data, bad_only=False))


@pytest.mark.parametrize("argv,says", [
    (["--ranks", "0-100000000000"], "ranks must be in 0..1"),
    (["--timeout", "nan"], "--timeout"), (["--timeout", "inf"], "--timeout"), (["--timeout", "1e300"], "--timeout"),
    (["--max-tests", "-1"], "--max-tests"), (["--drop", "100000000000:1"], "the run's ranks are 0..1"),
    (["--insert", "0:1=100000000000:0"], "the run's ranks are 0..1"), (["--emit-script", "a\x00b"], "NUL"),
])
def test_replay_values_found_to_end_in_exit_3_or_tracebacks_are_one_line(where, argv, says):
    """Each was a MemoryError after seconds (a range expanded before it was checked) or a replay
    that printed every worker's traceback."""
    res = run_cli("replay", str(where / "run"), *argv)
    assert res.code == 2 and says in res.err and "Traceback" not in res.err, res.err
