"""inputs.discover: what a path points to (a run directory, one log, a list of files, Flight
Recorder dumps, a logs root with several launches), found in one listing of each folder."""

from __future__ import annotations

import os
from collections import Counter

import pytest
from support.deadline import deadline
from support.fr_dumps import dump, entry, write_dumps
from support.logbytes import small_program

from collcheck import synth
from collcheck.inputs import discover as disc
from collcheck.inputs.discover import DUMPS, FILES, LOG, RUN, discover
from collcheck.logfile.reader import LogError
from collcheck.model import load_run

NO_LOGS = "no collcheck logs (*.msgpack) or Flight Recorder dumps found"


def _dumps(d):
    good = [entry(0, "0", 1, "all_reduce", [4]), entry(1, "0", 2, "all_reduce", [4])]
    return write_dumps(d, {0: dump(good, {"0": [0, 1]}), 1: dump(good, {"0": [0, 1]})})


@pytest.fixture
def listings(monkeypatch):
    """Folder -> how many times os.scandir listed it (os.listdir's: under ("listdir", folder));
    os.walk may not be used."""
    seen: Counter = Counter()
    scandir, listdir = os.scandir, os.listdir

    def scanned(path="."):
        seen[os.path.realpath(path)] += 1
        return scandir(path)

    def listed(path="."):
        seen["listdir", os.path.realpath(path)] += 1
        return listdir(path)

    def refused(*_a, **_k):
        raise AssertionError("a directory walked other than by discover's one listing of each folder")

    monkeypatch.setattr(os, "scandir", scanned)
    monkeypatch.setattr(os, "listdir", listed)
    monkeypatch.setattr(os, "walk", refused)
    return seen


def test_a_run_directory_nested_logs_too(tmp_path, listings):
    top = synth.write_run(str(tmp_path / "run"), small_program(2))
    deeper = synth.write_run(str(tmp_path / "run" / "node1"), small_program(2))
    (tmp_path / "run" / "notes.txt").write_text("x")
    src = discover(str(tmp_path / "run"))
    assert (src.kind, src.path, src.found, src.logs) == (RUN, str(tmp_path / "run"), sorted(top + deeper),
                                                          sorted(top + deeper))
    assert listings == {str(tmp_path / "run"): 1, str(tmp_path / "run" / "node1"): 1}


def test_one_log_file_and_a_list_of_files(tmp_path):
    paths = synth.write_run(str(tmp_path), small_program(2))
    src = discover(paths[1])
    assert (src.kind, src.path, src.found, src.logs) == (LOG, paths[1], [paths[1]], [paths[1]])
    src = discover(list(reversed(paths)))
    assert (src.kind, src.path, src.logs) == (FILES, None, list(reversed(paths)))
    d = _dumps(tmp_path / "dumps")
    dumps = [str(d / "comm_lib_trace_rank_0"), str(d / "comm_lib_trace_rank_1")]
    assert discover(dumps).kind == DUMPS
    assert discover([dumps[0], paths[0]]).kind == FILES  # not all dumps: read as logs (and refused so)


def test_flight_recorder_dumps_are_converted_once(tmp_path, monkeypatch, listings):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = _dumps(tmp_path / "dumps")
    os.mkfifo(d / "comm_lib_trace_rank_0.pipe")  # torch's dump trigger: passed over, never opened
    with deadline(10):
        src = discover(str(d))
    assert (src.kind, src.path) == (DUMPS, str(d))
    assert src.found == [str(d / "comm_lib_trace_rank_0"), str(d / "comm_lib_trace_rank_1")]
    assert listings == {str(d): 1}
    from collcheck.inputs.flight_recorder import convert

    converted = []
    real = convert.convert
    monkeypatch.setattr(convert, "convert", lambda paths: converted.append(paths) or real(paths))
    logs = src.logs
    assert src.logs is logs and converted == [src.found]
    assert [os.path.basename(p) for p in logs] == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"]
    assert all(p.startswith(str(tmp_path / "cache")) for p in logs)
    assert discover(str(d / "comm_lib_trace_rank_1")).kind == DUMPS
    run = load_run(src)
    assert (run.source, run.directory, sorted(run.ranks)) == ("flight-recorder", str(d), [0, 1])
    assert converted == [src.found]


def test_a_logs_root_newest_run_said_on_stderr(tmp_path, capsys, listings):
    old = synth.write_run(str(tmp_path / "a"), small_program(2))
    new = synth.write_run(str(tmp_path / "b"), small_program(3))
    os.utime(tmp_path / "a", (2_000_000_000, 2_000_000_000))
    os.utime(tmp_path / "b", (1_000_000_000, 1_000_000_000))
    src = discover(str(tmp_path), newest=True)
    assert (src.kind, src.path, src.logs) == (RUN, str(tmp_path / "a"), old)
    assert capsys.readouterr().err == (f"collcheck: {tmp_path} holds 2 runs; using the newest, {tmp_path / 'a'}\n")
    assert listings == {str(tmp_path): 1, str(tmp_path / "a"): 1}  # the older run is not listed
    listings.clear()
    src = discover(str(tmp_path))  # (load_run's own: every log under it, of both runs)
    assert src.logs == sorted(old + new) and capsys.readouterr().err == ""
    assert listings == {str(tmp_path): 1, str(tmp_path / "a"): 1, str(tmp_path / "b"): 1}
    synth.write_run(str(tmp_path), small_program(2))  # a log at its top: the root is a run
    assert discover(str(tmp_path), newest=True).path == str(tmp_path) and capsys.readouterr().err == ""


def test_load_run_lists_each_folder_once(tmp_path, listings):
    """Once by discover; then only a log's own folder, for its later segments (logfile.reader)."""
    synth.write_run(str(tmp_path / "run" / "node0"), small_program(2))
    (tmp_path / "run" / "other").mkdir()
    run = load_run(str(tmp_path / "run"))
    assert (run.directory, sorted(run.ranks)) == (str(tmp_path / "run"), [0, 1])
    scanned = {k: n for k, n in listings.items() if k[0] != "listdir"}
    assert scanned == {str(tmp_path / "run"): 1, str(tmp_path / "run" / "node0"): 1, str(tmp_path / "run" / "other"): 1}
    assert {k[1] for k in listings if k[0] == "listdir"} <= {str(tmp_path / "run" / "node0")}


def _refused(target, **options) -> str:
    with deadline(10), pytest.raises(LogError) as exc:
        discover(target, **options)
    return str(exc.value)


def test_what_is_refused(tmp_path, monkeypatch):
    assert _refused(str(tmp_path / "nope")) == f"{tmp_path / 'nope'}: no such file or directory"
    (tmp_path / "empty").mkdir()
    assert _refused(str(tmp_path / "empty"), newest=True) == f"{tmp_path / 'empty'}: {NO_LOGS}"
    fifo = tmp_path / "run" / "rank-00001.0.msgpack"
    synth.write_run(str(tmp_path / "run"), small_program(1))
    os.mkfifo(fifo)
    assert _refused(str(tmp_path / "run")) == f"{fifo}: a FIFO, not a log file"
    assert _refused(str(fifo)) == f"{fifo}: a FIFO, not a Flight Recorder dump file"
    os.remove(fifo)
    synth.write_run(str(tmp_path / "run" / "x"), small_program(2))
    monkeypatch.setattr(disc, "MAX_LOGS", 2)
    assert _refused(str(tmp_path / "run")) == f"{tmp_path / 'run'}: more than 2 log files; pass one run directory"


def test_a_file_named_like_a_log_means_no_dump_is_opened(tmp_path, monkeypatch):
    """A dangling link named like a log: no log, and the other files are not sniffed for dumps
    (a big run has thousands of files)."""
    d = _dumps(tmp_path / "d")
    os.symlink(tmp_path / "gone", d / "rank-00000.0.msgpack")
    monkeypatch.setattr(disc, "sniff", lambda p: pytest.fail(f"opened {p}"))
    assert _refused(str(d)) == f"{d}: {NO_LOGS}"
