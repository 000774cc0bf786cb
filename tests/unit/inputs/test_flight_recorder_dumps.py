"""Flight Recorder dumps as input (collcheck/model/fr_*.py), built in memory: safe loading,
conversion into the model, wrapped ring buffers, honest gaps, the cases of torch's own analyzer
tests; read by the real CLI in-process."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
from types import SimpleNamespace

import pytest
from support import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collcheck.analysis.diff import analyse
from collcheck.model import load_run
from collcheck.inputs.discover import discover
from collcheck.inputs.flight_recorder.convert import convert
from collcheck.inputs.flight_recorder.load import load_dump
from collcheck.logfile.reader import LogError
from support.cli import run_cli
from support.fr_dumps import dump, entry, fr_event, peer_dump, write_dumps


def cli(*args, cwd=None, env=None):
    with contextlib.chdir(cwd or os.getcwd()):
        res = run_cli(*args, env=env)
    return SimpleNamespace(returncode=res.code, stdout=res.out, stderr=res.err)


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


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
            # a call site per op, as a program has (not one that cycles with the buffer's record ids)
            frames = [{"name": op, "filename": "/x/site-packages/torch/distributed/distributed_c10d.py", "line": 3000},
                      {"name": "train", "filename": "/home/u/train.py", "line": 40 + len(op)},
                      {"name": "<module>", "filename": "/home/u/train.py", "line": 99}]
            entries.append(entry(len(entries), g, seq[g], op, [n], frames=frames))
        status = {str(int(g)): {"last_enqueued_collective": s, "last_started_collective": s,
                                "last_completed_collective": s} for g, s in seq.items()}
        d = dump(entries[-keep[rank]:], members)
        d["pg_status"] = status
        dumps[rank] = d
    root = tmp_path_factory.mktemp("fr")
    d = write_dumps(root / "dumps", dumps)
    run = load_run(convert(discover(str(d)).found, cache=str(root / "cache")))
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


# -- peer suite: the cases of torch's own analyzer tests (test_fr_analysis.py), as dump files ---------


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
    findings = _first_findings(tmp_path, {0: peer_dump(r0, 0), 1: peer_dump(r1, 1)})
    if expected is None:
        assert findings == [], findings[:1]
        return
    kinds, position = expected
    assert findings and findings[0]["kind"] in (kinds if isinstance(kinds, tuple) else (kinds,)), findings[:1]
    assert findings[0]["position"] == position, findings[:1]


def test_p2p_and_missing_dump_cases(tmp_path):
    """A send whose recv never came is an unmatched message, blamed on the rank that never posted
    the recv (torch's analyzer reports every other member of the group as missing); a rank whose dump is absent
    is said, not blamed for everything (torch stops, or blames it at every collective)."""
    members = {"0": [0, 1, 2, 3]}
    send = entry(1, "0", 1, "send 0->1", [8], is_p2p=True, p2p_seq=1, state="started")
    dumps = {r: dump([entry(0, "0", 1, "all_reduce", [4])] + ([send] if r == 0 else []), members) for r in range(4)}
    (finding,) = _first_findings(tmp_path / "p2p", dumps)
    assert finding["kind"] == "unmatched_p2p" and finding["ranks"] == [1], finding  # it never posted the recv
    del dumps[3]
    d = write_dumps(tmp_path / "missing" / "dumps", {r: dict(dumps[r], entries=dumps[r]["entries"][:1]) for r in dumps})
    proc = cli("diff", str(d), "--format", "json", env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "c")))
    report = json.loads(proc.stdout)
    assert report["findings"] == [] and any("no Flight Recorder dump for rank(s) 3" in w for w in report["unchecked"]), report
    assert proc.returncode == 4 and report["verdict"] == "incomplete", (proc.returncode, report["verdict"])
