"""PyTorch Flight Recorder dumps as input: safe loading, conversion into the model, wrapped ring
buffers, honest gaps; real gloo jobs that wrote torch's own dumps, read by the real CLI."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys

import pytest
from conftest import base_env, free_port, marker_lines, program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collcheck.analysis.diff import analyse
from collcheck.model import load_run
from collcheck.model.fr_convert import convert, find_dumps
from collcheck.model.fr_load import load_dump
from collcheck.reader import LogError


def cli(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "collcheck.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=env)


def entry(record_id, pg, seq, op, sizes, dtype="Float", p2p_seq=0, is_p2p=False, state="completed",
          frames=None, backend="nccl"):
    """One Flight Recorder entry as torch 2.13 writes it (pickle dump, version 2.10)."""
    return {
        "record_id": record_id, "pg_id": int(pg) if pg.isdigit() else 9, "process_group": (pg, "undefined"),
        "collective_seq_id": seq, "p2p_seq_id": p2p_seq, "op_id": seq, "profiling_name": f"{backend}:{op}",
        "time_created_ns": 1_700_000_000_000_000_000 + record_id * 1000, "duration_ms": None,
        "input_sizes": [list(sizes)], "input_dtypes": [dtype], "output_sizes": [list(sizes)],
        "output_dtypes": [dtype], "state": state, "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None, "retired": True, "timeout_ms": 600000, "is_p2p": is_p2p,
        "thread_id": "1", "thread_name": "MainThread",
        "frames": frames if frames is not None else [
            {"name": "all_reduce", "filename": "/x/site-packages/torch/distributed/distributed_c10d.py", "line": 3000},
            {"name": "train", "filename": "/home/u/train.py", "line": 40 + record_id % 3},
            {"name": "<module>", "filename": "/home/u/train.py", "line": 99}],
    }


def dump(entries, groups, version="2.10"):
    return {"version": version, "pg_config": {name: {"name": name, "desc": "undefined", "ranks": json.dumps(r)}
                                              for name, r in groups.items()},
            "pg_status": {}, "comm_lib_version": "2.21.5", "entries": entries}


def write_dumps(d, dumps, fmt="pickle"):
    d.mkdir(parents=True, exist_ok=True)
    for rank, data in dumps.items():
        path = d / f"comm_lib_trace_rank_{rank}"
        if fmt == "json":
            path.write_text(json.dumps(data))
        else:
            path.write_bytes(pickle.dumps(data, protocol=2))
    return d


# -- safe loading --------------------------------------------------------------------------------


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_a_dump_that_names_a_callable_runs_nothing(tmp_path):
    d = tmp_path / "dumps"
    d.mkdir()
    (d / "rank_0").write_bytes(pickle.dumps({"version": "2.10", "entries": [_Boom()]}, protocol=2))
    proc = cli("diff", str(d), cwd=tmp_path)
    assert proc.returncode == 2 and "refused to load posix.system" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("case, message", [
    ("version", "version 3.0 is not supported"),
    ("truncated", "damaged or truncated"),
    ("no-rank", "cannot tell which rank"),
    ("not-a-map", "not a Flight Recorder dump"),
    ("bad-entries", "entries are not a list of maps"),
    ("empty", "no entries in any of the 2 Flight Recorder dumps"),
])
def test_bad_dumps_get_one_line_and_exit_2(tmp_path, case, message):
    d = tmp_path / "dumps"
    good = dump([entry(0, "0", 1, "all_reduce", [4])], {"0": [0, 1]})
    if case == "version":
        write_dumps(d, {0: dict(good, version="3.0")})
    elif case == "truncated":
        write_dumps(d, {0: good})
        data = (d / "comm_lib_trace_rank_0").read_bytes()
        (d / "comm_lib_trace_rank_0").write_bytes(data[: len(data) // 2])
    elif case == "no-rank":
        d.mkdir()
        (d / "trace_rank").write_bytes(pickle.dumps(good, protocol=2))
    elif case == "not-a-map":
        d.mkdir()
        (d / "rank_0").write_bytes(pickle.dumps(["version", "entries"], protocol=2))
    elif case == "bad-entries":
        write_dumps(d, {0: dict(good, entries={"a": 1})})
    elif case == "empty":  # what torch dumps after destroy_process_group
        write_dumps(d, {0: dump([], {}), 1: dump([], {})})
    proc = cli("diff", str(d))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_dumps_load_or_fail_cleanly(tmp_path, data):
    """Any cut or flipped byte of a real-shaped dump: a dict or a LogError, nothing else."""
    raw = bytearray(pickle.dumps(dump([entry(i, "0", i + 1, "all_reduce", [4]) for i in range(5)],
                                      {"0": [0, 1]}), protocol=data.draw(st.integers(2, 5))))
    cut = data.draw(st.integers(0, len(raw)))
    raw = raw[:cut]
    for _ in range(data.draw(st.integers(0, 3))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    path = tmp_path / "rank_0"
    path.write_bytes(bytes(raw))
    try:
        assert isinstance(load_dump(str(path)), dict)
    except LogError:
        pass


# -- the model -------------------------------------------------------------------------------------


def _program(rng_ops, world):
    """A correct program: (group, op, size) in issue order; group "1" holds ranks 0 and 1 only."""
    return [(g, op, n) for g, op, n in rng_ops if g == "0" or world >= 2]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["0", "0", "1", "2"]), st.sampled_from(["all_reduce", "broadcast",
                                                                                   "all_gather"]),
                              st.integers(1, 9)), min_size=1, max_size=40),
       keep=st.lists(st.integers(1, 60), min_size=3, max_size=3))
def test_wrapped_buffers_of_a_correct_program_give_no_finding(tmp_path_factory, ops, keep):
    """Three ranks; group "1" is ranks 0 and 1, group "2" is rank 0 alone (so the ranks' buffers
    hold different numbers of entries and wrap at different points). Each rank keeps only its
    last `keep[rank]` entries: aligned by sequence numbers, nothing is reported."""
    members = {"0": [0, 1, 2], "1": [0, 1], "2": [0]}
    dumps = {}
    for rank in range(3):
        seq, entries = {}, []
        for g, op, n in ops:
            if rank not in members[g]:
                continue
            seq[g] = seq.get(g, 0) + 1
            entries.append(entry(len(entries), g, seq[g], op, [n]))
        status = {str(int(g)): {"last_enqueued_collective": s, "last_started_collective": s,
                                "last_completed_collective": s} for g, s in seq.items()}
        d = dump(entries[-keep[rank]:], members)
        d["pg_status"] = status
        dumps[rank] = d
    root = tmp_path_factory.mktemp("fr")
    d = write_dumps(root / "dumps", dumps)
    run = load_run(convert(find_dumps(str(d)), cache=str(root / "cache")))
    report = analyse(run)
    assert report.findings == [], [f.title for f in report.findings]
    assert run.source == "flight-recorder"
    assert any("no reduce op" in w for w in run.warnings)


def test_a_skipped_collective_is_found_in_wrapped_buffers(tmp_path):
    """Rank 1 skips one all_reduce late in the run, then both broadcast: both buffers wrapped, at
    different points; the broadcast stands against rank 0's last all_reduce, #28 of the group.
    Both ranks' streams wait from #24 on (NCCL entries never completed), so both sequences end
    where the ranks were stuck: the reading that lines the rest up is rank 1 missing an all_reduce."""
    members = {"0": [0, 1]}
    dumps = {}
    for rank in (0, 1):
        entries, seq = [], 0
        for i in range(30):
            if rank == 1 and i == 25:
                continue
            seq += 1
            entries.append(entry(len(entries), "0", seq, "all_reduce" if i < 29 else "broadcast", [8],
                                 state="completed" if i < 24 else "scheduled"))
        dumps[rank] = dump(entries[-(8 + 3 * rank):], members)
    d = write_dumps(tmp_path / "dumps", dumps)
    proc = cli("diff", str(d), "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "c")))
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    first = report["findings"][0]
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("missing", "0", 28, [1]), first
    assert any("checked from #22" in w and "Flight Recorder buffers wrapped" in w for w in report["warnings"])


# -- real jobs -------------------------------------------------------------------------------------


def fr_job(tmp_path, scenario, fmt="pickle", buffer=2000):
    """Run tests/programs/fr_dump.py on 2 gloo ranks (no collcheck): torch's own dumps."""
    out = tmp_path / f"fr-{scenario}-{fmt}"
    out.mkdir()
    env = base_env(tmp_path, record=False, extra={"TORCH_FR_BUFFER_SIZE": str(buffer)})
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                           str(free_port()), program("fr_dump.py"), str(out), scenario, fmt],
                          env=env, capture_output=True, text=True, timeout=100)
    assert sorted(os.listdir(out)) == ["rank_0", "rank_1"], proc.stderr[-3000:]
    return out


@pytest.mark.timeout(200)
@pytest.mark.parametrize("fmt", ["pickle", "json"])
def test_real_dumps_of_a_skipped_collective(tmp_path, fmt):
    out = fr_job(tmp_path, "skip", fmt)
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


@pytest.mark.timeout(200)
def test_real_wrapped_dumps_of_a_correct_program(tmp_path):
    out = fr_job(tmp_path, "clean", buffer=6)
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
@pytest.mark.timeout(200)
def test_tui_and_replay_read_real_dumps(tmp_path, monkeypatch):
    """The same dumps in the TUI (first divergence selected) and in replay (the same finding on
    local processes)."""
    from test_tui import drive

    out = fr_job(tmp_path, "skip")
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


def test_nccl_p2p_and_coalesced_entries(tmp_path):
    """NCCL-style entries: a send of 8 floats against a recv of 16 (group-local peers in the
    name), then a coalesced block of two all-reduces whose second tensors differ."""
    d0 = [entry(0, "0", 1, "all_reduce", [4]),
          entry(1, "0", 1, "send 0->1", [8], is_p2p=True, p2p_seq=1, state="started")]
    d1 = [entry(0, "0", 1, "all_reduce", [4]),
          entry(1, "0", 1, "recv 1<-0", [16], is_p2p=True, p2p_seq=1, state="started")]
    for d, n in ((d0, 3), (d1, 5)):
        k = len(d)
        d += [entry(k, "0", 2, "all_reduce", [2], state="scheduled"), entry(k + 1, "0", 2, "all_reduce", [n],
                                                                              state="scheduled"),
              entry(k + 2, "0", 2, "coalesced", [], state="scheduled")]
    d = write_dumps(tmp_path / "dumps", {0: dump(d0, {"0": [0, 1]}), 1: dump(d1, {"0": [0, 1]})})
    proc = cli("diff", str(d), "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "c")))
    assert proc.returncode == 1, proc.stderr
    found = {(f["kind"], f["group"], f["position"]): f for f in json.loads(proc.stdout)["findings"]}
    p2p = found[("shape_mismatch", "0", 0)]
    assert "send float32[8] peer 1" in p2p["message"] and "recv float32[16] peer 0" in p2p["message"], p2p
    coalesced = found[("shape_mismatch", "0", 1)]
    assert {e["api"] for e in coalesced["events"].values()} == {"all_reduce_coalesced"}, coalesced
    assert "float32[2], float32[5]" in coalesced["message"], coalesced
    assert not any("send/recv" in w for w in json.loads(proc.stdout)["warnings"])  # NCCL records P2P


def _diff_dumps(tmp_path, dumps) -> dict:
    d = write_dumps(tmp_path / "dumps", dumps)
    proc = cli("diff", str(d), "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "c")))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _first_findings(tmp_path, dumps) -> list[dict]:
    """The divergences (NCCL entries never completed also give the hang that follows from them)."""
    return [f for f in _diff_dumps(tmp_path, dumps)["findings"] if f["kind"] not in ("hang", "deadlock")]


def test_four_ranks_blame_the_odd_one_whatever_the_file_order(tmp_path):
    """torch's analyzer blames whichever rank's file it reads first; collcheck the minority."""
    members = {"0": [0, 1, 2, 3]}
    dumps = {r: dump([entry(0, "0", 1, "all_reduce", [4]),
                      entry(1, "0", 2, "broadcast" if r == 2 else "all_reduce", [4], state="scheduled")], members)
             for r in range(4)}
    (first,) = _first_findings(tmp_path, dumps)
    assert (first["kind"], first["position"], first["ranks"]) == ("op_mismatch", 1, [2]), first


def test_p2p_numbered_like_a_collective_is_no_finding(tmp_path):
    """`all_reduce` (collective seq 1) then a send/recv pair (p2p seq 1): torch's analyzer takes the
    pair for a coalesced group and crashes; it is a correct exchange."""
    members = {"0": [0, 1]}
    dumps = {0: dump([entry(0, "0", 1, "all_reduce", [4]),
                      entry(1, "0", 1, "send 0->1", [4], is_p2p=True, p2p_seq=1)], members),
             1: dump([entry(0, "0", 1, "all_reduce", [4]),
                      entry(1, "0", 1, "recv 1<-0", [4], is_p2p=True, p2p_seq=1)], members)}
    assert _first_findings(tmp_path, dumps) == []


def test_a_rank_that_ran_ahead_under_nccl_is_one_finding(tmp_path):
    """Rank 0's #3 `started` and it enqueued #4 and #5 behind it; rank 1 never issued #3: one
    divergence at #3 (index 2 from 0), nothing for the queued ones; the hang says rank 0's stream
    waits there on rank 1, with two more enqueued behind it, and where each CPU thread had got to."""
    members = {"0": [0, 1]}
    r0 = [entry(0, "0", 1, "all_reduce", [4]), entry(1, "0", 2, "all_reduce", [4]),
          entry(2, "0", 3, "all_reduce", [4], state="started")]
    r0 += [entry(k, "0", k + 1, "all_reduce", [4], state="scheduled") for k in (3, 4)]
    report = _diff_dumps(tmp_path, {0: dump(r0, members), 1: dump(r0[:2], members)})
    findings = report["findings"]
    assert [(f["kind"], f["group"], f["position"]) for f in findings] == [("extra", "0", 2), ("hang", "0", 2)], findings
    hang = findings[1]
    assert hang["ranks"] == [1] and hang["details"]["queued"] == {"0": 2}, hang
    assert "enqueued 2 more behind it" in hang["message"], hang["message"]
    assert report["wait_for"] == [[0, 1, "0"]], report["wait_for"]
    ranks = report["ranks"]
    assert ranks["0"]["state"] == "waiting-at-dump" and ranks["0"]["queued_behind"] == 2, ranks["0"]
    assert [e["position"] for e in ranks["0"]["blocked_in"]] == [2], ranks["0"]
    assert "its stream waits in #2 of group 0" in ranks["0"]["detail"], ranks["0"]["detail"]
    assert "last enqueued all_reduce float32[4] (#4 of group 0)" in ranks["0"]["detail"], ranks["0"]["detail"]
    assert ranks["1"]["state"] == "dumped" and "(#1 of group 0)" in ranks["1"]["detail"], ranks["1"]


def test_wrapped_buffers_with_p2p_are_not_matched_by_kept_order(tmp_path):
    """A correct loop of all_reduce + send 0->1 / recv, buffers wrapped at different points: FR
    numbers P2P per group, not per peer, so the channels cannot be aligned. No false unmatched
    message; the report says which messages were not matched."""
    members = {"0": [0, 1]}
    dumps = {}
    for rank in (0, 1):
        entries = []
        for i in range(20):
            entries.append(entry(len(entries), "0", i + 1, "all_reduce", [8]))
            entries.append(entry(len(entries), "0", i + 1, "send 0->1" if rank == 0 else "recv 1<-0", [4],
                                 is_p2p=True, p2p_seq=i + 1))
        dumps[rank] = dump(entries[-(7 + 4 * rank):], members)
    report = _diff_dumps(tmp_path, dumps)
    assert report["findings"] == [], report["findings"][:1]
    assert any("point-to-point messages 0->1 not matched" in w for w in report["warnings"]), report["warnings"]


def test_collectives_in_flight_on_every_rank_are_no_hang(tmp_path):
    """A dump of a running job (or of a hang below the calls): every member enqueued the last
    collective, none completed it. No finding; the report says where they were, not 'clean'."""
    members = {"0": [0, 1]}
    entries = [entry(0, "0", 1, "all_reduce", [4]), entry(1, "0", 2, "all_reduce", [4], state="started")]
    report = _diff_dumps(tmp_path, {0: dump(entries, members), 1: dump(entries, members)})
    assert report["findings"] == [] and report["verdict"] == "clean", report["findings"]
    assert any("were inside #1 of group 0, which every member had enqueued" in w for w in report["warnings"])


# -- export ----------------------------------------------------------------------------------------


def _first(report: dict):
    f = report["findings"][0]
    return f["kind"], f["group"], f["position"], f["ranks"]


@pytest.mark.timeout(300)
def test_fr_export_is_read_by_torchfrtrace_and_by_collcheck(tmp_path, scenario_run):
    """A recorded scenario exported as Flight Recorder dumps: torch's analyzer reports the same
    op mismatch, and collcheck reads its own export back to the same first finding."""
    _, run_dir, _ = scenario_run("op_mismatch")
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


@pytest.mark.timeout(300)
def test_perfetto_export_is_a_valid_trace(tmp_path, scenario_run):
    """Trace Event Format, checked field by field: a slice per collective on its rank's group
    track, each matched slot one flow (start, finish), one instant event per finding."""
    _, run_dir, _ = scenario_run("op_mismatch")
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
    "order_mismatch": ("incomplete", "no Flight Recorder dump for rank(s) 0"),
    "semantic_mismatch": ("incomplete", "no Flight Recorder dump for rank(s) 1"),
    "train_then_eval_gather": ("incomplete", "no Flight Recorder dump for rank(s) 1"),
    "group_mismatch": ("incomplete", "only one rank's entries use each"),
    "cross_group_deadlock": ("incomplete", "only one rank's entries use each"),
    # both ranks abort; whichever survives its peer's abort long enough dumps
    "bucket_order_threads": ("incomplete", "no Flight Recorder dump for rank(s)"),
    "unmatched_p2p": ("refused", "gloo records no send/recv"),
    "p2p_tag_mismatch": ("refused", "gloo records no send/recv"),
}
FROM_DUMPS_FAST = ["missing_barrier", "reduce_op_mismatch", "extra_allreduce"]  # same, gap, incomplete


def test_every_scenario_says_what_its_dumps_give():
    from collcheck.demo import SCENARIOS_DIR

    names = {n for n in os.listdir(SCENARIOS_DIR) if os.path.isfile(os.path.join(SCENARIOS_DIR, n, "main.py"))}
    assert names == set(FROM_DUMPS), names ^ set(FROM_DUMPS)


def fr_scenario(tmp_path, name: str) -> str:
    """scenarios/NAME under torchrun with tests/programs/fr_wrap.py: torch's dumps, no collcheck."""
    from collcheck.demo import SCENARIOS_DIR

    with open(os.path.join(SCENARIOS_DIR, name, "scenario.json")) as f:
        nproc = json.load(f)["nproc"]
    out = tmp_path / f"fr-{name}"
    out.mkdir()
    script = os.path.join(SCENARIOS_DIR, name, "main.py")
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--master-port",
                    str(free_port()), program("fr_wrap.py"), str(out), script, "60"],
                   env=base_env(tmp_path, record=False), capture_output=True, text=True, timeout=150)
    return str(out)


def _diff_json(path: str, tmp_path, codes=(0, 1)) -> dict:
    proc = cli("diff", path, "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache")))
    assert proc.returncode in codes, (proc.returncode, proc.stderr)
    return json.loads(proc.stdout)


def _first_or_clean(report: dict):
    return _first(report) if report["findings"] else "clean"


def _check_scenario(tmp_path, scenario_run, name: str) -> None:
    _, run_dir, _ = scenario_run(name)
    logs = _diff_json(run_dir, tmp_path)
    dumps_dir = fr_scenario(tmp_path, name)
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


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", FROM_DUMPS_FAST)
def test_scenario_dumps_give_the_logs_first_finding(tmp_path, scenario_run, name):
    _check_scenario(tmp_path, scenario_run, name)


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", sorted(set(FROM_DUMPS) - set(FROM_DUMPS_FAST)))
def test_more_scenario_dumps_give_the_logs_first_finding(tmp_path, scenario_run, name):
    _check_scenario(tmp_path, scenario_run, name)


# -- peer suite: the cases of torch's own analyzer tests (test_fr_analysis.py), as dump files ---------


def fr_event(record_id, name, inputs, outputs, state="completed", seq=0, dtype="float32", out_dtype=None,
             pg=("0", "default")):
    """An entry as torch's test_fr_analysis.py builds them (string sequence ids, one dtype name)."""
    return {"record_id": record_id, "profiling_name": f"nccl:{name}", "state": state, "process_group": pg,
            "input_sizes": inputs, "output_sizes": outputs, "input_dtypes": dtype,
            "output_dtypes": dtype if out_dtype is None else out_dtype, "collective_seq_id": str(seq),
            "p2p_seq_id": "0", "time_created_ns": 0, "frames": [], "is_p2p": False}


def _peer_dump(entries, rank):
    return {"version": "2.8", "entries": entries, "pg_config": {
        "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"},
        "1": {"name": "1", "desc": "sub_pg", "ranks": f"[{rank}]"}}}


A, B = [[4, 4]], [[5, 5]]
PEER_CASES = {
    # torch's build_db cases 1-6
    "matched all_reduce, one-rank sub-groups": (
        [fr_event(0, "all_reduce", A, A), fr_event(1, "all_reduce", B, B, pg=("1", "sub_pg"))],
        [fr_event(0, "all_reduce", A, A), fr_event(1, "all_reduce", B, B, pg=("1", "sub_pg"))], None),
    "matched allreduce_coalesced": (
        [fr_event(0, "allreduce_coalesced", A, A)], [fr_event(0, "allreduce_coalesced", A, A)], None),
    "two broadcasts coalesced": (
        [fr_event(0, "broadcast", A, A), fr_event(1, "broadcast", A, A), fr_event(2, "coalesced", [[]], [[]])],
        [fr_event(0, "broadcast", A, A), fr_event(1, "broadcast", A, A), fr_event(2, "coalesced", [[]], [[]])], None),
    "uneven coalesced broadcasts": (
        [fr_event(0, "_broadcast_oop", A, A), fr_event(1, "_broadcast_oop", B, B),
         fr_event(2, "ALLGATHER_coalesced", [[]], [[]])],
        [fr_event(0, "_broadcast_oop", A, A), fr_event(1, "_broadcast_oop", A, A),
         fr_event(2, "ALLGATHER_coalesced", [[]], [[]])], ("shape_mismatch", 0)),
    "matched coalesced reduces": (
        [fr_event(0, "_reduce_oop", A, A), fr_event(1, "_reduce_oop", A, A),
         fr_event(2, "REDUCE_SCATTER_coalesced", [[]], [[]])],
        [fr_event(0, "_reduce_oop", A, A), fr_event(1, "_reduce_oop", A, A),
         fr_event(2, "REDUCE_SCATTER_coalesced", [[]], [[]])], None),
    # torch passes this one (its case 6); collcheck reports it: the coalesced reduce that only rank 1
    # issues is a collective its peer never joins (with two ranks, rank 0 missing it or rank 1
    # issuing one more are the same finding)
    "a coalesced reduce on one rank only": (
        [fr_event(0, "all_reduce", A, A, seq=0)],
        [fr_event(0, "all_reduce", A, A, seq=0), fr_event(1, "_reduce_oop", A, A, seq=1),
         fr_event(2, "_reduce_oop", A, A, seq=1), fr_event(3, "REDUCE_SCATTER_coalesced", [[]], [[]], seq=1)],
        (("missing", "extra"), 1)),
    # torch's match_one_event cases
    "type mismatch": ([fr_event(0, "all_reduce", A, A)], [fr_event(0, "all_gather", A, [[32]])], ("op_mismatch", 0)),
    "input size mismatch": ([fr_event(0, "all_reduce", A, A)], [fr_event(0, "all_reduce", [[5, 4]], [[5, 4]])],
                            ("shape_mismatch", 0)),
    "dtype mismatch": ([fr_event(0, "all_reduce", A, A)], [fr_event(0, "all_reduce", A, A, dtype="float16")],
                       ("dtype_mismatch", 0)),
    # torch says COLLECTIVE_STATE_MISMATCH; one rank's copy completed, so every rank joined it: with
    # nothing issued after it, that is no desync
    "completed on one rank, scheduled on the other": (
        [fr_event(0, "all_reduce", A, A, state="scheduled")], [fr_event(0, "all_reduce", A, A)], None),
    "gather: only the root has outputs": (
        [fr_event(0, "gather", A, [[4, 4], [4, 4]])], [fr_event(0, "gather", A, [[]], out_dtype="")], None),
    # torch cannot decide (UNDECIDED); equal sizes and dtypes on every rank are a valid all-to-all
    "all_to_all, same sizes": ([fr_event(0, "all_to_all", A, A)], [fr_event(0, "all_to_all", A, A)], None),
}


@pytest.mark.parametrize("case", sorted(PEER_CASES))
def test_torch_analyzer_cases(tmp_path, case):
    r0, r1, expected = PEER_CASES[case]
    findings = _first_findings(tmp_path, {0: _peer_dump(r0, 0), 1: _peer_dump(r1, 1)})
    if expected is None:
        assert findings == [], findings[:1]
        return
    kinds, position = expected
    assert findings and findings[0]["kind"] in (kinds if isinstance(kinds, tuple) else (kinds,)), findings[:1]
    assert findings[0]["position"] == position, findings[:1]


def test_p2p_and_missing_dump_cases(tmp_path):
    """A send whose recv never came is an unmatched message between those two ranks (torch's
    analyzer reports every other member of the group as missing); a rank whose dump is absent
    is said, not blamed for everything (torch stops, or blames it at every collective)."""
    members = {"0": [0, 1, 2, 3]}
    send = entry(1, "0", 1, "send 0->1", [8], is_p2p=True, p2p_seq=1, state="started")
    dumps = {r: dump([entry(0, "0", 1, "all_reduce", [4])] + ([send] if r == 0 else []), members) for r in range(4)}
    (finding,) = _first_findings(tmp_path / "p2p", dumps)
    assert finding["kind"] == "unmatched_p2p" and sorted(finding["ranks"]) == [0, 1], finding
    del dumps[3]
    d = write_dumps(tmp_path / "missing" / "dumps", {r: dict(dumps[r], entries=dumps[r]["entries"][:1]) for r in dumps})
    proc = cli("diff", str(d), "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "c")))
    report = json.loads(proc.stdout)
    assert report["findings"] == [] and any("no Flight Recorder dump for rank(s) 3" in w for w in report["unchecked"]), report
    assert proc.returncode == 4 and report["verdict"] == "incomplete", (proc.returncode, report["verdict"])
