"""The compiled recording fast path (collcheck/capture/fastpath*): same log as the Python path.

The extension is built once per test session (skipped with the reason when no C++ compiler or
ninja is found), then the shared recordings of real 2-rank torchrun jobs with COLLCHECK_FASTPATH=1
(`name@compiled`) and =0 are compared: every C record (op, group, tensors, reduce op, root/peer,
tag, API fields, purpose labels, call sites, thread) and which collectives completed.
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import diff_json, run_cli
from support.corpus import FASTPATH_BUILD_TIMEOUT as BUILD_TIMEOUT
from support.jobs import base_env, log_files, marker_lines, program

from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log
from collcheck.model import load_run


@pytest.fixture
def built(fastpath_env, monkeypatch):
    """The compiled path built (conftest.fastpath_env) and found by every process started here."""
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    return fastpath_env


def resolved(path: str):
    """A log with interned ids replaced by what they name: ([C records], {eid: D record})."""
    strings, sites, specs, threads, groups = {}, {}, {}, {}, {}
    colls, done = [], {}
    for r in read_log(path).records:
        k = r["k"]
        if k == lf.STRING:
            strings[r["i"]] = r["s"]
        elif k == lf.SITE:
            sites[r["i"]] = (strings[r["f"]], r["l"], strings[r["n"]])
        elif k == lf.TSPEC:
            specs[r["i"]] = tuple((strings[d], tuple(s)) for d, s in r["t"])
        elif k == lf.THREAD:
            threads[r["h"]] = r["n"]
        elif k == lf.GROUP and r["op"] == "seen":
            groups[r["gid"]] = (r["g"], r.get("d"), tuple(r.get("r", ())))
        elif k == lf.COLL:
            c = {key: v for key, v in r.items() if key not in ("ts", "d")}  # (d: completions, as D records)
            c["o"], c["g"], c["h"] = strings[c["o"]], groups[c["g"]], threads[c.get("h", 0)]
            for key, table in (("t", specs), ("s", sites), ("x", strings), ("u", strings), ("l", strings)):
                if key in c:
                    c[key] = table[c[key]]
            if "st" in c:
                c["st"] = [sites[i] for i in c["st"]]
            colls.append(c)
        elif k == lf.DONE:
            done[r["i"]] = r
    return colls, done


def both(corpus, name: str):
    """The run dirs of recording `name` on the compiled path and on the Python path."""
    runs = {}
    for at in ("@compiled", ""):
        rec = corpus(name + at)
        assert rec.rc == 0, rec.tail()
        assert ("compiled fast path in use" in rec.stderr) == (at == "@compiled"), rec.stderr[-2000:]
        runs[at] = rec.run_dir
    return runs["@compiled"], runs[""]


def assert_same_logs(fast_dir: str, python_dir: str) -> int:
    fast_logs, python_logs = log_files(fast_dir), log_files(python_dir)
    assert [os.path.basename(f) for f in fast_logs] == [os.path.basename(f) for f in python_logs]
    total = 0
    for f, p in zip(fast_logs, python_logs):
        (fc, fd), (pc, pd) = resolved(f), resolved(p)
        assert len(fc) == len(pc) and fc, os.path.basename(f)
        for i, (a, b) in enumerate(zip(fc, pc)):
            assert a == b, f"{os.path.basename(f)} collective {i}:\nfast   {a}\npython {b}"
        # every collective has its D record, completed (c) or returned only (gloo P2P), same errors
        assert sorted(fd) == sorted(pd) == list(range(len(fc))), os.path.basename(f)
        for i in fd:
            assert ("c" in fd[i], fd[i].get("e")) == ("c" in pd[i], pd[i].get("e")), (os.path.basename(f), i)
        total += len(fc)
    return total


@pytest.mark.recordings("ddp_join@compiled", "ddp_join")
def test_ddp_join_same_records(corpus):
    """DDP's C++ reducer (records written by C++), bucket numbering per pass, join's shadow passes."""
    fast, python = both(corpus, "ddp_join")
    assert assert_same_logs(fast, python) > 40
    colls, _ = resolved(log_files(fast)[0])
    buckets = [c["l"] for c in colls if c.get("u") == "gradient bucket"]
    assert buckets and all(label.endswith(" 0") for label in buckets)
    assert all(c["s"][0] == program("ddp_join.py") for c in colls)


@pytest.mark.recordings("every_op@compiled", "every_op")
def test_every_op_same_records(corpus):
    """Python dist.* calls (API names, call ids, blocking vs async, errors), P2P, coalescing,
    functional collectives, DTensor, subgroups."""
    fast, python = both(corpus, "every_op")
    assert assert_same_logs(fast, python) > 60
    for rank in (0, 1):  # live mode's hashes: the same signatures mixed on both paths
        states = []
        for run_dir in (fast, python):
            with open(os.path.join(run_dir, f"live-state-{rank}.json")) as f:
                states.append(json.load(f))
        assert states[0] == states[1] and len(states[0]["g"]) >= 3 and states[0]["c"], states


@pytest.mark.recordings("threads@compiled")
def test_threads_recording_at_once_lose_no_record(corpus):
    """Four threads per rank issue all-reduces on groups of their own at once, the compiled path
    writing their records without the GIL, while live mode reads the same tables every 50 ms and
    the log rolls over segments: every collective is in the log once, in its thread's group,
    numbered without a gap, at its own call site (each site twice in a row, then another: the
    memo of the thread's last stack is used, and left), completed, and the two ranks agree."""
    script = program("threads_groups.py")
    lines = marker_lines(script)
    expected = [lines[("async", "blocking", "helper")[n // 2 % 3]] for n in range(300)]
    rec = corpus("threads@compiled")
    assert rec.rc == 0 and "compiled fast path in use" in rec.stderr, rec.tail()
    assert "Warning" not in rec.stderr, rec.stderr[-3000:]
    without_gil = [int(n) for n in re.findall(r"done, (\d+) records without the GIL", rec.stdout)]
    assert len(without_gil) == 2 and min(without_gil) > 600, rec.stdout  # (most of the 1,200 a rank)
    run = load_run(rec.run_dir)
    for rank in (0, 1):
        log = run.ranks[rank]
        events = [log.event(i) for i in range(len(log))]
        assert [e.index for e in events] == list(range(len(events)))
        by_thread = {}
        for e in events:
            if e.sig.op == "allreduce_":
                by_thread.setdefault(e.thread, []).append(e)
        assert sorted(by_thread) == [f"issuer-{i}" for i in range(4)], sorted(by_thread)
        for thread, mine in by_thread.items():
            assert len(mine) == 300 and len({e.group for e in mine}) == 1, (rank, thread, len(mine))
            assert [e.position for e in mine] == list(range(300)), (rank, thread)
            assert all(e.completed for e in mine), (rank, thread)
            assert [e.site[1] for e in mine] == expected and {e.site[0] for e in mine} == {script}, (rank, thread)
        assert len({mine[0].group for mine in by_thread.values()}) == 4
    assert glob.glob(os.path.join(rec.run_dir, "rank-0000[01].0.msgpack.*")), os.listdir(rec.run_dir)  # (segments rolled)
    code, report = diff_json(rec.run_dir)
    assert code == 0 and not report["findings"], report


@pytest.mark.slow
@pytest.mark.recordings("ddp_join_full@compiled", "ddp_join_full")
def test_full_stack_same_records(corpus):
    """COLLCHECK_STACK=full: every record carries its whole stack, so none is written by C++ alone."""
    fast, python = both(corpus, "ddp_join_full")
    assert assert_same_logs(fast, python) > 40
    assert all("st" in c for c in resolved(log_files(fast)[0])[0])


# each case in a fresh state of the same process: fastpath.load() caches what it found
_LOAD_CHECK = """
import os, sys, torch
from collcheck.capture.native import fastpath
for case in sys.argv[1:]:
    setting, extensions_dir = case.split(",")
    os.environ["COLLCHECK_FASTPATH"] = setting
    if extensions_dir:
        os.environ["TORCH_EXTENSIONS_DIR"] = extensions_dir
    else:
        os.environ.pop("TORCH_EXTENSIONS_DIR", None)
    fastpath._loaded = None
    module = fastpath.load()
    print(case, "loaded" if module is not None else "python", flush=True)
    print("end of", case, file=sys.stderr, flush=True)
"""
LOAD_RULES = [  # (COLLCHECK_FASTPATH, TORCH_EXTENSIONS_DIR, what loads, what it says)
    ("0", None, "python", ""),
    ("", None, "loaded", ""),
    ("", "empty", "python", ""),  # not built for this torch: silent, never compiled here
    ("1", "empty", "python", "not built"),
]


def test_load_rules(built, tmp_path):
    cases = [f"{setting},{tmp_path / where if where else ''}" for setting, where, _, _ in LOAD_RULES]
    env = base_env(tmp_path, record=False)
    proc = subprocess.run([sys.executable, "-c", _LOAD_CHECK, *cases], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stderr.split("end of ")
    for (setting, where, expect, says), case, line, err in zip(LOAD_RULES, cases, proc.stdout.splitlines(), said):
        assert line == f"{case} {expect}", (line, case)
        assert (says in err) if says else "collcheck:" not in err, err
    assert not (tmp_path / "empty").exists()  # loading never builds


# One process for the checks of the compiled module's parts (importing torch takes seconds):
# the CRC-32 of many lengths, then a log written through its WriterLock.
_PARTS_CHECK = """
import os, random, sys, zlib
from collcheck.capture.native import fastpath
from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log
from collcheck.logfile.writer import LogWriter, open_exclusive
module = fastpath.load()
rng = random.Random(7)
cases = [bytes(rng.getrandbits(8) for _ in range(n)) for n in [*range(0, 300), 1021, 4096, 65537]]
cases += [bytes(n) for n in (16, 64, 100)] + [b"\\xff" * n for n in (16, 64, 100)]
print(sum(module.crc32(b) != zlib.crc32(b) for b in cases), len(cases))

def resident_kib(path):  # the log's shared mapping: its pages in memory (kB)
    found, rss = False, None
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split()[0]:
                found = line.rstrip().endswith(" " + path)
            elif found and line.startswith("Rss:"):
                rss = int(line.split()[1])
    return rss

fd, path = open_exclusive(sys.argv[1], "rank-00000.0")
w = LogWriter(fd, os.path.realpath(path), fastpath.writer_lock())
with w.lock:
    w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "r"})
    w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": 1, "j": 0}, 0)
print(resident_kib(os.path.realpath(path)), w.counters.written)
w.close()
print(sum(r["k"] == lf.COLL for r in read_log(path).records), os.path.getsize(path))
"""


@pytest.fixture(scope="module")
def parts_checked(fastpath_env, tmp_path_factory) -> list[list[int]]:
    """_PARTS_CHECK's lines, as numbers, run once on the built module."""
    where = tmp_path_factory.mktemp("parts")
    env = base_env(where, record=False, extra=fastpath_env)
    env.pop("TORCH_EXTENSIONS_DIR", None)
    proc = subprocess.run([sys.executable, "-c", _PARTS_CHECK, str(where)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [[int(x) for x in line.split()] for line in proc.stdout.splitlines()]


def test_frames_carry_zlibs_crc(parts_checked):
    """The compiled path's CRC-32 (16 bytes a step with carry-less multiplication where the CPU has
    it, a table for the rest) is zlib's on every length around its step and on long runs."""
    assert parts_checked[0] == [0, 309], parts_checked


def test_log_pages_are_faulted_in_ahead_of_the_records(parts_checked):
    """The first records of a segment leave a window of the log's mapping already in memory
    (a record's copy that touched a fresh page would take that page's fault itself), and what
    the file holds after close is the records alone."""
    (rss, written), (colls, size) = parts_checked[1:]
    assert written < 4096 and rss >= 256, parts_checked  # the populated window, not the page written
    assert colls == 1 and size == written


def test_status_when_not_built(tmp_path):
    """`collcheck build-fastpath --status` on a machine without a build: says so, exit 1, builds nothing."""
    res = run_cli("build-fastpath", "--status", env={"TORCH_EXTENSIONS_DIR": str(tmp_path / "empty")})
    assert res.code == 1 and res.out.startswith("not built: " + str(tmp_path / "empty")), res
    assert not (tmp_path / "empty").exists()


@pytest.mark.slow  # (capped logs in the default run: test_capped.py; the compiled path: test_every_op_same_records)
@pytest.mark.recordings("capped_ddp@compiled")
def test_capped_log_written_by_the_compiled_path(corpus):
    """The compiled path starts new segments itself (DDP's C++ all-reduces): the capped log
    still reads, lines up and names the divergence with its real sequence number."""
    script = program("long_run.py")
    rec = corpus("capped_ddp@compiled")
    run_dir = rec.run_dir
    assert "compiled fast path in use" in rec.stderr and rec.rc != 0, rec.tail()
    assert any(".msgpack." in f for f in os.listdir(run_dir))  # segments were started
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert code == 1 and first["kind"] == "op_mismatch" and first["ranks"] == [1]
    sites = {e["rank"]: e["site"] for e in first["events"].values() if e}
    assert sites[1]["line"] == marker_lines(script)["diverge"]
    assert any("checked from #" in w for w in report["warnings"])
    assert not [w for w in report["warnings"] if "damaged" in w or "unreadable" in w]


@pytest.fixture
def small_run(tmp_path) -> str:
    from collcheck.synth import write_clean_run

    write_clean_run(str(tmp_path / "run"), 2, 10)
    return str(tmp_path / "run")


def _cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "collcheck", *args], env=env, capture_output=True, text=True,
                          timeout=120)


def _wait_for(path, seconds: float = 90) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


@pytest.mark.timeout(BUILD_TIMEOUT + 240)
def test_the_first_command_builds_it_once_in_the_background(built, tmp_path, small_run):
    """No extra step: the first `collcheck` command starts the build (here it finds the build
    already there and only stamps it), says so once, and never again."""
    from collcheck.capture.native import build as autobuild
    from collcheck.capture.native import fastpath

    built_in = os.path.dirname(fastpath.build_directory())  # where the session's build is (XDG_CACHE_HOME moves it)
    env = base_env(tmp_path, record=False, extra={"COLLCHECK_FASTPATH": "", "XDG_CACHE_HOME": str(tmp_path / "cache"),
                                                  "TORCH_EXTENSIONS_DIR": built_in})
    first = _cli(["diff", small_run], env)
    assert first.returncode in (0, 1) and "compiling the recording fast path in the background" in first.stderr
    stamp = subprocess.run([sys.executable, "-c", "from collcheck.capture.native import build; print(build.stamp())"],
                           env=env, capture_output=True, text=True, timeout=60).stdout.strip()
    assert stamp.startswith(str(tmp_path / "cache")) and autobuild.OUTCOMES[0] == ".built"
    _wait_for(Path(stamp + ".built"))
    again = _cli(["diff", small_run], env)
    assert "fast path" not in again.stderr
    status = _cli(["build-fastpath", "--status"], env)
    assert status.returncode == 0 and "in use: new jobs record with the compiled path" in status.stdout


@pytest.mark.slow  # (~9 s; the default run builds in the background above)
def test_without_a_compiler_the_first_command_says_why_once(tmp_path, small_run):
    """No C++ compiler: the background try stamps why, `--status` says it, later commands are quiet."""
    env = base_env(tmp_path, record=False, extra={
        "COLLCHECK_FASTPATH": "", "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"), "CXX": str(tmp_path / "no-such-compiler")})
    first = _cli(["diff", small_run], env)
    assert "compiling the recording fast path in the background" in first.stderr
    _wait_for_glob(tmp_path / "cache" / "collcheck", "*.skipped")
    status = _cli(["build-fastpath", "--status"], env)
    assert status.returncode == 1 and "skipped: " in status.stdout and "no-such-compiler" in status.stdout, status
    assert "fast path" not in _cli(["diff", small_run], env).stderr
    assert not (tmp_path / "extensions").exists()


def _wait_for_glob(directory, pattern: str, seconds: float = 60) -> None:
    import time

    deadline = time.monotonic() + seconds
    while not list(directory.glob(pattern)):
        assert time.monotonic() < deadline, f"no {pattern} in {directory}"
        time.sleep(0.2)


@pytest.mark.parametrize("name", [pytest.param("no_future", marks=pytest.mark.recordings("no_future")),
                                  pytest.param("no_future@compiled", marks=[pytest.mark.recordings("no_future@compiled"), pytest.mark.slow])])
def test_work_without_a_future_is_asked_once(corpus, name):
    """gloo's reduce-scatter Work has no future: every async one is recorded as returned (its
    completion unknown), and each path asks once (the compiled one per Work type, the Python one
    per op and group), not per call."""
    from collcheck.model import load_run

    proc = corpus(name)
    assert proc.rc == 0, proc.tail()
    assert "without a future 1" in proc.stdout
    log = load_run(os.path.join(proc.run_dir, "nofuture")).ranks[0]
    events = [log.event(i) for i in range(len(log))]
    assert len(events) == 300 and {e.sig.op for e in events} == {"_reduce_scatter_base_"}
    assert log.unconfirmed == list(range(300))  # returned, completion unknown
