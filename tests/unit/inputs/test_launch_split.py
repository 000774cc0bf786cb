"""inputs.launches: the launches of a folder, from the headers alone: one per run id (its restarts
kept together), and a reused run id (a test runner's spawned ranks) split by time."""

from __future__ import annotations

import os

import pytest
from support.deadline import deadline
from support.logbytes import small_program

from collcheck import synth
from collcheck.base.errors import UsageError
from collcheck.inputs import launches as ls
from collcheck.inputs.discover import discover
from collcheck.inputs.launches import find_launches, newest, pick
from collcheck.logfile.reader import LogError
from collcheck.synth import logs as synth_logs

S = 1_000_000_000  # ns
T0 = 1_700_000_000 * S


def write(directory, run_id: str, world: int = 2, start_s: float = 0, end_s: float | None = None,
          ranks=None) -> list[str]:
    """A clean launch of `world` ranks (only `ranks` kept) whose processes began at T0 + start_s
    and last wrote at T0 + end_s (the file's mtime)."""
    prog = small_program(world)
    prog.run_id = run_id
    paths = synth.write_run(str(directory), prog, wall_ns=T0 + int(start_s * S))
    kept = []
    for rank, path in enumerate(paths):
        if ranks is not None and rank not in ranks:
            os.remove(path)
            continue
        if end_s is not None:
            os.utime(path, ns=(T0 + int(end_s * S),) * 2)
        kept.append(path)
    return kept


def members(launches) -> list[tuple[str, list[str]]]:
    return [(launch.id, launch.source.found) for launch in launches]


def test_a_folder_of_one_launch_is_the_source_as_found(tmp_path):
    write(tmp_path / "run", "job")
    src = discover(str(tmp_path / "run"))
    [launch] = find_launches(src)
    assert (launch.id, launch.run, launch.world, launch.logs) == ("job", "job", 2, 2)
    assert launch.source is src and launch.started_ns == T0


def test_each_run_id_is_a_launch_oldest_first_with_its_restarts(tmp_path, monkeypatch):
    late = write(tmp_path / "a", "job-a", world=2, start_s=50, end_s=60)
    early = write(tmp_path / "b", "job-b", world=3, start_s=10)
    header = synth_logs._header  # job-a restarted by torchrun: the same id, restart 1, later
    monkeypatch.setattr(synth_logs, "_header", lambda prog, rank, wall_ns, *host: {**header(prog, rank, wall_ns, *host), "restart": 1})
    restart = write(tmp_path / "a", "job-a", world=2, start_s=70)
    found = find_launches(discover(str(tmp_path)))
    assert members(found) == [("job-b", early), ("job-a", sorted(late + restart))]
    assert [(x.world, x.source.path, x.started_ns) for x in found] == [(3, str(tmp_path / "b"), T0 + 10 * S),
                                                                      (2, str(tmp_path / "a"), T0 + 50 * S)]


def test_a_reused_run_id_is_split_by_time(tmp_path):
    """Three tests' spawned ranks in one folder under the session's run id: the first lost rank 1,
    the third's rank 1 began before its rank 0. Each log joins the launch alive at its start."""
    first = write(tmp_path, "pytest", start_s=0, end_s=5, ranks=[0])
    second = write(tmp_path, "pytest", start_s=10, end_s=15)
    third_1 = write(tmp_path, "pytest", start_s=19, end_s=25, ranks=[1])
    third_0 = write(tmp_path, "pytest", start_s=20, end_s=26, ranks=[0])
    other = write(tmp_path / "x", "pytest", world=3, start_s=12, end_s=14)  # another world: its own
    found = find_launches(discover(str(tmp_path)))
    assert members(found) == [("pytest#1", first), ("pytest#2", second), ("pytest#3", other),
                              ("pytest#4", sorted(third_1 + third_0))]
    assert [x.source.path for x in found] == [str(tmp_path)] * 2 + [str(tmp_path / "x"), str(tmp_path)]


def test_copied_logs_whose_times_were_lost_split_by_rank(tmp_path):
    """A copy that set every mtime before the logs began: ends unknown, a log joins the newest
    launch without its rank."""
    a = write(tmp_path, "ci", start_s=100, end_s=1)
    b = write(tmp_path, "ci", start_s=200, end_s=1)
    assert members(find_launches(discover(str(tmp_path)))) == [("ci#1", a), ("ci#2", b)]


def test_a_run_id_like_a_split_ones_keeps_a_name_of_its_own(tmp_path):
    write(tmp_path / "a", "t", start_s=0, end_s=1)
    write(tmp_path / "a", "t", start_s=5, end_s=6)
    write(tmp_path / "b", "t#2", start_s=10, end_s=11)
    assert [x.id for x in find_launches(discover(str(tmp_path)))] == ["t#1", "t#2", "t#2#"]


def test_pick_by_id_or_unique_prefix(tmp_path):
    write(tmp_path / "a", "job-a", start_s=1)
    write(tmp_path / "b", "job-b", start_s=2)
    write(tmp_path / "c", "other", start_s=3)
    found = find_launches(discover(str(tmp_path)))
    assert pick(found, "job-b", "D").id == "job-b" and pick(found, "oth", "D").id == "other"
    with pytest.raises(UsageError) as exc:
        pick(found, "job", "D")
    assert str(exc.value) == "--launch job names 2 launches in D: job-a, job-b"
    with pytest.raises(UsageError) as exc:
        pick(found, "nope", "D")
    assert str(exc.value) == "no launch nope in D; its launches: job-a, job-b, other"


def test_newest_is_said_on_stderr(tmp_path, capsys):
    write(tmp_path / "a", "job-a", start_s=9)
    write(tmp_path / "b", "job-b", start_s=2)
    assert newest(find_launches(discover(str(tmp_path))), "D", "tui").id == "job-a"
    assert capsys.readouterr().err == ("collcheck tui: D holds 2 launches; using the newest, job-a "
                                       "(--launch ID picks another: job-b, job-a)\n")
    single = find_launches(discover(str(tmp_path / "a")))
    assert newest(single, "D", "tui").id == "job-a" and capsys.readouterr().err == ""


def test_an_unreadable_header_is_one_line(tmp_path):
    paths = write(tmp_path, "job")
    open(paths[1], "wb").close()
    with pytest.raises(LogError, match="empty file"):
        find_launches(discover(str(tmp_path)))


def test_the_split_is_linear_in_the_logs():
    """20,000 logs of 10,000 two-rank launches under one run id, ends unknown (no file): each
    log looks at MAX_ALIVE launches at most (the launches of a reused id are not searched all)."""
    logs = [ls._Log(f"/nonexistent/{i}", "r", 2, rank, 0, i // 2) for i, rank in enumerate([0, 1] * 10_000)]
    with deadline(10):
        parts = ls._by_time(logs)
    assert len(parts) == 10_000 and all([log.rank for log in part] == [0, 1] for part in parts)


def test_the_headers_of_a_folder_of_one_launch_are_read_once(tmp_path, monkeypatch):
    """find_launches hands them to load_run (Source.headers); a folder of several launches keeps
    none (each launch's load_run reads its own)."""
    from collcheck.model import load as load_module
    from collcheck.model import load_run

    reads = []
    real = ls.read_header

    def counted(path):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(ls, "read_header", counted)
    monkeypatch.setattr(load_module, "read_header", counted)
    paths = write(tmp_path / "run", "job", world=3)
    [launch] = find_launches(discover(str(tmp_path / "run")))
    run = load_run(launch.source)
    assert sorted(run.ranks) == [0, 1, 2] and reads == paths and len(launch.source.headers) == 3
    reads.clear()
    write(tmp_path / "run", "job", world=3, start_s=100)
    found = find_launches(discover(str(tmp_path / "run")))
    assert len(found) == 2 and len(reads) == 6 and all(x.source.headers is None for x in found)
