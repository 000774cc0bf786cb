"""PyTorch Flight Recorder dumps of real gloo jobs (torch's own dumps, no collcheck), read by the
real CLI; collcheck's exports read by torch's analyzer and by Perfetto's format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from support.cli import run_cli
from support.jobs import marker_lines, program

from collcheck.inputs.flight_recorder import convert as fr_convert


def cli(*args, env=None):
    res = run_cli(*args, env=env)
    return SimpleNamespace(returncode=res.code, stdout=res.out, stderr=res.err)


# -- real jobs -------------------------------------------------------------------------------------


def fr_job(corpus, name: str) -> Path:
    """tests/integration/programs/fr_dump.py on 2 gloo ranks (no collcheck): torch's own dumps."""
    rec = corpus(name)
    out = Path(rec.folder)
    assert sorted(os.listdir(out)) == ["rank_0", "rank_1"], rec.tail()
    return out


@pytest.mark.parametrize("fmt", [pytest.param("pickle", marks=pytest.mark.recordings("fr_dump_skip_pickle")),
                                 pytest.param("json", marks=[pytest.mark.recordings("fr_dump_skip_json"),
                                                             pytest.mark.slow])])
def test_real_dumps_of_a_skipped_collective(tmp_path, fmt, corpus):
    out = fr_job(corpus, f"fr_dump_skip_{fmt}")
    marks = marker_lines(program("fr_dump.py"))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = cli("diff", str(out), "--format", "json", env=env)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    first = report["findings"][0]
    assert first["group"] == "0" and first["position"] == 1, first
    assert (first["kind"], first["ranks"]) == ("op_mismatch", [1])
    assert {e["api"] for e in first["events"].values()} == {"all_reduce", "broadcast"}, first
    text = cli("diff", str(out), env=env).stdout
    assert "no reduce op" in text and "records no send/recv" in text
    if fmt == "pickle":  # only the pickle holds the frames (the JSON dump has none)
        assert f"fr_dump.py:{marks['helper']}" in text and f"fr_dump.py:{marks['broadcast']}" in text, text
        assert "helper_all_reduce()" in text


@pytest.mark.parametrize("name", [
    pytest.param("fr_dump_skip_pickle", marks=pytest.mark.recordings("fr_dump_skip_pickle")),
    pytest.param("fr_dump_clean_pickle", marks=[pytest.mark.recordings("fr_dump_clean_pickle"), pytest.mark.slow])])
def test_real_dumps_read_in_worker_processes_give_the_same_report(tmp_path, corpus, monkeypatch, name):
    """Read here (a few dumps) and as thousands are read: by the C unpickler in worker processes,
    ranks of one kind sharing a log (the threshold lowered to these two dumps)."""
    out = fr_job(corpus, name)
    reports = []
    for share_from in (fr_convert.SHARE_FROM, 2):
        monkeypatch.setattr(fr_convert, "SHARE_FROM", share_from)
        proc = cli("diff", str(out), "--format", "json", env={"XDG_CACHE_HOME": str(tmp_path / str(share_from))})
        reports.append((proc.returncode, json.loads(proc.stdout)))
    assert reports[0] == reports[1]


def _decoded_in_a_worker(path: str) -> tuple:
    """In a worker process: the dump decoded by the C unpickler under its limits, and its summary."""
    from collcheck.inputs.flight_recorder.load import decode_dump

    decoded = decode_dump(path, fast=True)
    return decoded.raw, fr_convert._summary_of((0, path, decoded.crc))


def _decoded_here(path: str) -> tuple:
    raise AssertionError(f"{path}: a worker died reading a real dump")


@pytest.mark.parametrize("name", [
    pytest.param("fr_dump_skip_pickle", marks=pytest.mark.recordings("fr_dump_skip_pickle")),
    pytest.param("fr_dump_clean_pickle", marks=[pytest.mark.recordings("fr_dump_clean_pickle"), pytest.mark.slow])])
def test_the_c_unpickler_in_a_worker_reads_real_dumps_as_the_python_one_does(corpus, name):
    """torch's own dumps: what the C unpickler builds in a worker process, and the summary made
    there from the columns, are what the Python unpickler builds here and the summary of its
    entries checked one by one."""
    from collcheck.inputs.flight_recorder import parallel
    from collcheck.inputs.flight_recorder.columns import Columns
    from collcheck.inputs.flight_recorder.load import decode_dump
    from collcheck.inputs.flight_recorder.schema import dump_of
    from collcheck.inputs.flight_recorder.summary import summarize

    paths = sorted(str(p) for p in fr_job(corpus, name).iterdir())
    got = dict(parallel.run_all(_decoded_in_a_worker, paths, 1, _decoded_here))
    for i, path in enumerate(paths):
        here = decode_dump(path, fast=False)
        raw, summary = got[i]
        assert raw == here.raw and len(raw["entries"]) > 0, path
        checked = dump_of(path, here.raw, here.size)
        assert summary == summarize(0, path, checked, Columns.of_entries(checked["entries"])), path


@pytest.mark.recordings("fr_dump_skip_pickle")
def test_the_compiled_scanner_takes_torchs_own_dumps_as_they_read_otherwise(corpus):
    """torch's C++ pickler's dumps (memo entries after their maps, shared frames and names): the
    scanner takes them, and gives the header, columns and summary that reading them as before
    gives (tests/unit/inputs/test_fr_compiled.py compares on every other shape)."""
    from collcheck.inputs.flight_recorder import compiled
    from collcheck.inputs.flight_recorder.columns import Columns
    from collcheck.inputs.flight_recorder.load import decode_dump
    from collcheck.inputs.flight_recorder.schema import dump_of
    from collcheck.inputs.flight_recorder.summary import summarize

    if compiled.library() is None:
        pytest.skip("no C compiler to build the dump scanner")
    for path in sorted(str(p) for p in fr_job(corpus, "fr_dump_skip_pickle").iterdir()):
        with open(path, "rb") as f:
            got = compiled.scan_dump(path, f.read())
        assert got is not None, path
        decoded = decode_dump(path)
        checked = dump_of(path, decoded.raw, decoded.size)
        cols = Columns.of_entries(checked["entries"])
        head = {k: v for k, v in checked.items() if k != "entries"}
        assert {k: v for k, v in got[0].items() if k != "entries"} == head and len(cols) > 0
        assert got[1].values() == cols.values()
        assert summarize(0, path, *got) == summarize(0, path, checked, cols)


@pytest.mark.slow
@pytest.mark.recordings("fr_dump_clean_pickle")
def test_real_wrapped_dumps_of_a_correct_program(tmp_path, corpus):
    out = fr_job(corpus, "fr_dump_clean_pickle")
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    proc = cli("diff", str(out), env=env)
    # no finding; its groups used by one rank only in what the buffers kept cannot be compared
    # (gloo's broken group table does not say who else is in them): incomplete, not clean
    assert proc.returncode == 4 and "No divergence in what could be checked" in proc.stdout, proc.stdout + proc.stderr
    assert "only one rank's entries use each" in proc.stdout, proc.stdout
    assert "checked from #" in proc.stdout and "Flight Recorder buffers wrapped" in proc.stdout, proc.stdout
    assert "reconstructed" in proc.stdout  # gloo's broken pg_config
    show = cli("show", str(out / "rank_0"), env=env)
    assert show.returncode == 0 and "all_reduce" in show.stdout, show.stderr


@pytest.mark.slow  # its own recording and a replay; the default run reads real dumps with diff and export
@pytest.mark.recordings("fr_dump_skip_pickle")
def test_tui_and_replay_read_real_dumps(tmp_path, monkeypatch, corpus):
    """The same dumps in the TUI (first divergence selected) and in replay (the same finding on
    local processes)."""
    from support.tui import drive

    out = fr_job(corpus, "fr_dump_skip_pickle")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    async def script(pilot, app):
        assert app.report.verdict != "clean"
        await pilot.press("f")
        assert app.selected()[1:3] == ("0", 1), app.selected()
        await pilot.press("q")

    drive(str(out), script)
    proc = cli("replay", str(out), env=dict(os.environ))
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the hang reproduced
    assert "matches the recording: yes" in proc.stdout, proc.stdout


# -- export ----------------------------------------------------------------------------------------


def _first(report: dict):
    f = report["findings"][0]
    return f["kind"], f["group"], f["position"], f["ranks"]


@pytest.mark.recordings("scenario:op_mismatch")
def test_fr_export_is_read_by_torchfrtrace_and_by_collcheck(tmp_path, corpus):
    """A recorded scenario exported as Flight Recorder dumps: torch's analyzer reports the same
    op mismatch, and collcheck reads its own export back to the same first finding."""
    run_dir = corpus("scenario:op_mismatch").run_dir
    out = tmp_path / "fr"
    proc = cli("export", run_dir, "--format", "fr", "-o", str(out))
    assert proc.returncode == 0 and sorted(os.listdir(out)) == ["rank_0", "rank_1"], proc.stderr
    frtrace = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(out), "-p",
                              "rank_"], capture_output=True, text=True, timeout=120)
    assert "COLLECTIVE_TYPE_MISMATCH" in frtrace.stdout + frtrace.stderr, frtrace.stdout + frtrace.stderr
    assert "'all_reduce' does not match found collective type: 'broadcast'" in frtrace.stdout + frtrace.stderr
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    original = json.loads(cli("diff", run_dir, "--format", "json").stdout)
    back = json.loads(cli("diff", str(out), "--format", "json", env=env).stdout)
    assert _first(back) == _first(original) == ("op_mismatch", "0", 0, [1])


@pytest.mark.recordings("scenario:op_mismatch")
def test_perfetto_export_is_a_valid_trace(tmp_path, corpus):
    """Trace Event Format, checked field by field: a slice per collective on its rank's group
    track, each matched slot one flow (start, finish), one instant event per finding."""
    run_dir = corpus("scenario:op_mismatch").run_dir
    path = tmp_path / "trace.json"
    assert cli("export", run_dir, "-o", str(path)).returncode == 0
    events = json.loads(path.read_text())["traceEvents"]
    report = json.loads(cli("diff", run_dir, "--format", "json").stdout)
    slices = [e for e in events if e["ph"] == "X" and e["cat"] == "collective"]
    assert len(slices) == sum(1 for _ in report["findings"][0]["events"])  # one collective per rank here
    for e in events:
        assert e["ph"] in {"M", "X", "s", "t", "f", "i"} and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] != "M":
            assert isinstance(e["ts"], int) and e["ts"] > 0
    assert all(e["dur"] >= 1 and e["name"] for e in slices)
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(names[(e["pid"], e["tid"])] == f"group {e['args']['group']}" for e in slices)
    flows: dict = {}
    for e in events:
        if e["ph"] in "stf":
            flows.setdefault(e["id"], []).append(e["ph"])
    assert flows and all(v[0] == "s" and v[-1] == "f" for v in flows.values()), flows
    instants = [e for e in events if e["ph"] == "i"]
    assert [e["args"]["position"] for e in instants] == [f["position"] for f in report["findings"]]


# -- scenarios: torch's own dumps against collcheck's own logs --------------------------------------

# What `collcheck diff` on torch's own dumps of each scenario gives, against collcheck's own log of
# the same program. "same": the same first finding (kind, group, position, culprits), or both
# clean. Otherwise the report must say why it could not: ("gap", warning, same slot?): a check FR
# has no field for; ("incomplete", unchecked): exit 4, ranks or groups it could not compare (gloo
# aborts a rank on a size mismatch before it can dump; gloo's broken group table); ("refused",
# stderr): exit 2, nothing to check (gloo records no send/recv; every rank aborted).
FROM_DUMPS = {
    "op_mismatch": "same", "missing_barrier": "same", "dtype_mismatch": "same", "gather_scatter_root": "same",
    "rank0_only_barrier": "same", "seed004_case1": "same", "seed004_case2": "same", "seed004_case3": "same",
    "seed004_case6": "same", "many_small_broadcasts": "same", "per_param_allreduce": "same", "pairwise_groups": "same",
    "join_uneven_inputs": "same", "p2p_pipeline": "same", "subgroup_members_only": "same",
    "root_mismatch": ("gap", "no root", False), "reduce_op_mismatch": ("gap", "no reduce op", False),
    "alltoall_split_mismatch": ("gap", "no all_to_all split sizes", False),
    # join()'s hidden all-reduces against a barrier: found at the same slot; without purposes the
    # culprit is read from call sites
    "seed004_case4": ("gap", "no purpose", True), "seed004_case5": ("gap", "no purpose", True),
    "extra_allreduce": ("incomplete", "no Flight Recorder dump for rank(s) 0"),
    "shape_mismatch": ("incomplete", "no Flight Recorder dump for rank(s) 1"),
    "semantic_mismatch": ("incomplete", "no Flight Recorder dump for rank(s) 1"),
    "train_then_eval_gather": ("incomplete", "no Flight Recorder dump for rank(s) 1"),
    "group_mismatch": ("incomplete", "only one rank's entries use each"),
    "cross_group_deadlock": ("incomplete", "only one rank's entries use each"),
    # both ranks abort; whichever survives its peer's abort long enough dumps (order_mismatch:
    # gloo's size check may fail on either rank first)
    "bucket_order_threads": ("incomplete", "no Flight Recorder dump for rank(s)"),
    "order_mismatch": ("incomplete", "no Flight Recorder dump for rank(s)"),
    "unmatched_p2p": ("refused", "gloo records no send/recv"),
    "p2p_tag_mismatch": ("refused", "gloo records no send/recv"),
}
FROM_DUMPS_FAST: list[str] = []  # every scenario's dumps with -m slow (the default run reads fr_dump.py's)


def test_every_scenario_says_what_its_dumps_give():
    from collcheck.cli.demo import SCENARIOS_DIR

    names = {n for n in os.listdir(SCENARIOS_DIR) if os.path.isfile(os.path.join(SCENARIOS_DIR, n, "main.py"))}
    assert names == set(FROM_DUMPS), names ^ set(FROM_DUMPS)


def fr_scenario(corpus, name: str) -> str:
    """scenarios/NAME under torchrun with tests/integration/programs/fr_wrap.py: torch's dumps, no
    collcheck."""
    return corpus(f"fr_scenario:{name}").folder


def _diff_json(path: str, tmp_path, codes=(0, 1)) -> dict:
    proc = cli("diff", path, "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert proc.returncode in codes, (proc.returncode, proc.stderr)
    return json.loads(proc.stdout)


def _first_or_clean(report: dict):
    return _first(report) if report["findings"] else "clean"


def _check_scenario(tmp_path, corpus, name: str) -> None:
    run_dir = corpus(f"scenario:{name}").run_dir
    logs = _diff_json(run_dir, tmp_path)
    dumps_dir = fr_scenario(corpus, name)
    expected = FROM_DUMPS[name]
    if expected == "same":
        dumps = _diff_json(dumps_dir, tmp_path)
        assert _first_or_clean(dumps) == _first_or_clean(logs), (dumps["findings"][:1], logs["findings"][:1])
        return
    assert logs["findings"], logs
    if expected[0] == "incomplete" and not os.listdir(dumps_dir):  # every rank aborted before dumping
        expected = ("refused", "no collcheck logs (*.msgpack) or Flight Recorder dumps found")
    if expected[0] == "refused":
        proc = cli("diff", dumps_dir, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
        errors = [line for line in proc.stderr.splitlines() if line.startswith("collcheck: error:")]
        assert proc.returncode == 2 and len(errors) == 1 and expected[1] in errors[0], proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        return
    if expected[0] == "incomplete":
        dumps = _diff_json(dumps_dir, tmp_path, codes=(4,))
        assert dumps["verdict"] == "incomplete" and any(expected[1] in w for w in dumps["unchecked"]), dumps
        return
    _, warning, same_slot = expected
    dumps = _diff_json(dumps_dir, tmp_path)
    assert any(warning in w for w in dumps["warnings"]), dumps["warnings"]
    if same_slot:
        assert dumps["findings"] and _first(dumps)[1:3] == _first(logs)[1:3], (dumps["findings"][:1], logs["findings"][:1])


def _both(name: str) -> list:
    return [f"scenario:{name}", f"fr_scenario:{name}"]


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.recordings(*_both(n))] + (
    [] if n in FROM_DUMPS_FAST else [pytest.mark.slow])) for n in sorted(FROM_DUMPS)])
def test_scenario_dumps_give_the_logs_first_finding(tmp_path, corpus, name):
    _check_scenario(tmp_path, corpus, name)
