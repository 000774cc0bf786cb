"""The recorder under real processes: every op, DDP + join, crashes, hangs, forks, internal errors, the API.

Each test reads the shared recording of a small program (tests/integration/programs/, run under
torchrun with COLLCHECK=1 once per session: support/corpus.py) through the run model
(collcheck.model), on the pure-Python recording path and on the compiled one (`@compiled`).
Call sites are checked against the `# @name` marker comments of the programs.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict
from pathlib import Path

import pytest

from collcheck.logfile import format as lf
from collcheck.logfile.reader import read_log
from collcheck.model import load_run
from support.cli import run_cli
from support.jobs import launch, log_files, marker_lines, program


def paths(name: str, slow_compiled: bool = True):
    """Parameters `name` and `name@compiled`, each marked with its recording; the compiled one with
    -m slow when `slow_compiled` (the default run reads both paths where they differ)."""
    marks = [pytest.mark.slow] if slow_compiled else []
    return [pytest.param(name, marks=[pytest.mark.recordings(name)], id="python"),
            pytest.param(name + "@compiled", marks=[pytest.mark.recordings(name + "@compiled"), *marks],
                         id="compiled")]

SUM, PRODUCT, MIN, MAX = 0, 2, 3, 4
F32, F64, F16, I64, I32, I16, U8 = "float32", "float64", "float16", "int64", "int32", "int16", "uint8"


def events_of(log):
    return [log.event(i) for i in range(len(log))]


def by_line(log, script):
    out = defaultdict(list)
    for e in events_of(log):
        if e.site is not None and e.site[0] == script:
            out[e.site[1]].append(e)
    return out


def results(stdout: str) -> dict:
    """`RESULT rank name repr(value)` lines -> {(rank, name): value}."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            _, rank, name, value = line.split(" ", 3)
            found[(int(rank), name)] = ast.literal_eval(value) if not value.startswith("'raised") else value
    return found


# ---------------------------------------------------------------------------------------------
# 1. every op
# ---------------------------------------------------------------------------------------------

def W(op, api, tensors, reduce_op=None, root=None, tag=0, native=False, async_op=None):
    """One expected wire record. tensors / root may be {rank: value} when they differ per rank."""
    return dict(op=op, api=api, tensors=tensors, reduce_op=reduce_op, root=root, tag=tag, native=native,
                async_op=async_op)


def T(*specs):
    return tuple((d, tuple(s)) for d, s in specs)


OTHER = {0: 1, 1: 0}
# marker -> (ranks that issue it, [expected wire records in order]); None tensors: dtypes not checked
EXPECTED = {
    "all_reduce_sum": ((0, 1), [W("allreduce_", "all_reduce", T((F32, [3])), SUM)]),
    "all_reduce_max": ((0, 1), [W("allreduce_", "all_reduce", T((F64, [2, 2])), MAX)]),
    "broadcast": ((0, 1), [W("broadcast_", "broadcast", T((I64, [4])), root=1)]),
    "reduce": ((0, 1), [W("reduce_", "reduce", T((F32, [5])), MIN, root=1)]),
    "all_gather": ((0, 1), [W("allgather_", "all_gather", T((I32, [2])))]),
    "all_gather_into_tensor": ((0, 1), [W("_allgather_base_", "all_gather_into_tensor", T((F32, [3])))]),
    "all_gather_single": ((0, 1), [W("_allgather_base_", "all_gather_single", T((F32, [2])))]),
    "reduce_scatter_single": ((0, 1), [W("_reduce_scatter_base_", "reduce_scatter_single", T((F32, [2])), SUM)]),
    "all_gather_object": ((0, 1), [W("allgather_", "all_gather_object", T((I64, [1]))),
                                   W("allgather_", "all_gather_object", U8)]),
    "all_gather_coalesced": ((0, 1), [W("allgather_coalesced_", "all_gather_coalesced", T((F32, [2]), (F32, [2])))]),
    "gather": ((0, 1), [W("gather_", "gather", T((F32, [4])), root=0)]),
    "gather_object": ((0, 1), [W("allgather_", "gather_object", T((I64, [1]))),
                               W("gather_", "gather_object", U8, root=1)]),
    "scatter": ((0, 1), [W("scatter_", "scatter", T((F16, [2])), root=1)]),
    "scatter_object_list": ((0, 1), [W("broadcast_", "scatter_object_list", T((I64, [1])), root=0),
                                     W("scatter_", "scatter_object_list", U8, root=0),
                                     W("scatter_", "scatter_object_list", T((I64, [1])), root=0)]),
    "reduce_scatter": ((0, 1), [W("reduce_scatter_", "reduce_scatter", T((F32, [2])), SUM)]),
    "reduce_scatter_tensor": ((0, 1), [W("_reduce_scatter_base_", "reduce_scatter_tensor", T((F32, [2])), SUM)]),
    # all-to-all shapes may differ across ranks: the model keeps dtypes only
    "all_to_all": ((0, 1), [W("alltoall_", "all_to_all", T((F32, []), (F32, [])))]),
    "all_to_all_single": ((0, 1), [W("alltoall_base_", "all_to_all_single", T((F32, [])))]),
    "broadcast_object_list": ((0, 1), [W("broadcast_", "broadcast_object_list", T((I64, [2])), root=0),
                                       W("broadcast_", "broadcast_object_list", U8, root=0)]),
    "barrier": ((0, 1), [W("barrier", "barrier", ())]),
    "monitored_barrier": ((0, 1), [W("monitored_barrier_", "monitored_barrier", ())]),
    "send": ((0,), [W("send", "send", T((I16, [6])), root=1, tag=3)]),
    "recv": ((1,), [W("recv_", "recv", T((I16, [6])), root=0, tag=3)]),
    "isend": ((1,), [W("send", "isend", T((F32, [2])), root=0, async_op=True)]),
    "irecv": ((0,), [W("recv_", "irecv", T((F32, [2])), root=1, async_op=True)]),
    "batch_isend_irecv": ((0, 1), [W("send", "batch_isend_irecv", T((F32, [3])), root=OTHER, async_op=True),
                                   W("recv_", "batch_isend_irecv", T((F32, [3])), root=OTHER, async_op=True)]),
    "send_object_list": ((0,), [W("send", "send_object_list", T((I64, [2])), root=1),
                                W("send", "send_object_list", U8, root=1)]),
    "recv_object_list": ((1,), [W("recv_", "recv_object_list", T((I64, [2])), root=0),
                                W("recv_", "recv_object_list", U8, root=0)]),
    # the coalesced op goes on the wire at the exit of the `with` block, issued by C++
    "coalescing": ((0, 1), [W("allreduce_coalesced_", "all_reduce_coalesced", T((F32, [2]), (F32, [3])), SUM,
                              native=True)]),
    "group_all_reduce": ((0, 1), [W("allreduce_", "all_reduce", T((F32, [2])), PRODUCT)]),
    "only0_all_reduce": ((0,), [W("allreduce_", "all_reduce", T((F32, [1])), SUM)]),
    "sub_all_reduce": ((0, 1), [W("allreduce_", "all_reduce", T((F32, [1])), SUM)]),
    "funcol": ((0, 1), [W("allreduce_", "all_reduce", T((F32, [4])), SUM, native=True)]),
    "distribute": ((0, 1), [W("scatter_", "scatter", T((F32, [2, 2])), root=0)]),
    "redistribute": ((0, 1), [W(("allgather_into_tensor_coalesced_", "_allgather_base_"), None, T((F32, [2, 2])),
                                native=True)]),
    "final_barrier": ((0, 1), [W("barrier", "barrier", ())]),
}
# expected members of the group each marker's collective runs on, per rank
GROUP_MEMBERS = {"group_all_reduce": {0: (0, 1), 1: (0, 1)}, "only0_all_reduce": {0: (0,)},
                 "sub_all_reduce": {0: (0,), 1: (1,)}}


@pytest.mark.parametrize("name", paths("every_op", slow_compiled=False))
def test_every_op_recorded_on_every_rank(corpus, name):
    script = program("every_op.py")
    marks = marker_lines(script)
    rec = corpus(name)
    assert rec.rc == 0, rec.tail()
    run_dir = rec.run_dir
    got = results(rec.stdout)
    # recording changes no result
    for r in (0, 1):
        assert got[(r, "all_reduce_sum")] == [3.0] * 3
        assert got[(r, "all_reduce_max")] == [[2.0, 2.0], [2.0, 2.0]]
        assert got[(r, "broadcast")] == [0, 2, 4, 6]
        assert got[(r, "all_gather_object")] == [{"rank": 0}, {"rank": 1}]
        assert got[(r, "all_gather_single")] == [0.0, 0.0, 1.0, 1.0]
        assert got[(r, "reduce_scatter_single")] == [[0.0, 3.0], [6.0, 9.0]][r]
        assert got[(r, "batch_isend_irecv")] == [float(1 - r)] * 3
        assert got[(r, "coalesced")] == [[3.0, 3.0], [3.0, 3.0, 3.0]]
        assert got[(r, "funcol")] == [3.0] * 4
        assert got[(r, "redistribute")] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]
        assert got[(r, "sub_all_reduce")] == [float(r + 3)]
    assert got[(1, "send_recv")] == list(range(6)) and got[(0, "isend_irecv")] == [5.0, 6.0]
    assert got[(1, "object_p2p")] == ["hello", 42] and got[(1, "gather_object")] == ["r0", "r1"]

    run = load_run(run_dir)
    assert sorted(run.ranks) == [0, 1] and run.warnings == []
    raised = {name for (r, name), v in got.items() if isinstance(v, str) and v.startswith("'raised")}
    for r, log in run.ranks.items():
        assert log.state == "finished" and not log.torn and log.junk is None and log.disabled is None
        lines = by_line(log, script)
        off_program = [e for e in events_of(log) if e.site is None or e.site[0] != script]
        assert off_program == [], [(e.sig, e.site) for e in off_program]
        # wire order follows program order
        order = [name for name, (ranks, _) in sorted(EXPECTED.items(), key=lambda kv: marks[kv[0]]) if r in ranks]
        seen = []
        for e in events_of(log):
            name = next(n for n, line in marks.items() if line == e.site[1])
            if not seen or seen[-1] != name:
                seen.append(name)
        assert seen == order, f"rank {r}"
        for name, (ranks, wires) in EXPECTED.items():
            events = lines.get(marks[name], [])
            if r not in ranks:
                assert events == [], f"rank {r} {name}"
                continue
            assert len(events) == len(wires), f"rank {r} {name}: {[e.sig for e in events]}"
            for e, want in zip(events, wires):
                where = f"rank {r} {name}: {e.sig}"
                ops = want["op"] if isinstance(want["op"], tuple) else (want["op"],)
                assert e.sig.op in ops, where
                if want["api"] is not None:
                    assert e.sig.api == want["api"], where
                if isinstance(want["tensors"], str):  # serialized objects: dtype only, 1-D
                    assert [(d, len(s)) for d, s in e.sig.tensors] == [(want["tensors"], 1)], where
                else:
                    assert e.sig.tensors == want["tensors"], where
                assert e.sig.reduce_op == want["reduce_op"], where
                root = want["root"][r] if isinstance(want["root"], dict) else want["root"]
                assert e.sig.root == root, where
                assert e.sig.tag == want["tag"], where
                assert e.native == want["native"], where
                if want["async_op"] is not None:
                    assert e.async_op == want["async_op"], where
                assert e.site == (script, marks[name], "main"), where
                assert e.sig.role is None, where
                if name in ("distribute", "redistribute"):  # DTensor: the user's call, torch's step
                    call = "distribute_tensor()" if name == "distribute" else "DTensor.redistribute()"
                    assert e.label.startswith(call + ": "), (where, e.label)
                else:  # the user's own call
                    assert e.label is None, (where, e.label)
                if name in raised:  # gloo refused it: the record stays, with the error the user got
                    assert e.error is not None and not e.completed, where
                    assert got[(r, name)].startswith(f"'raised {e.error}"), where
                else:
                    assert e.completed and e.error is None, where
                assert e.thread == "MainThread", where
            if len(events) > 1 and name not in ("batch_isend_irecv",):
                assert len({e.call_id for e in events}) == 1 and events[0].call_id is not None, name
            if name in GROUP_MEMBERS:
                assert run.group_members(events[0].group) == GROUP_MEMBERS[name][r], name
            elif name != "redistribute":
                assert events[0].group == "0", name
        # group creation, in call order, with members and call sites
        creations = [(c.op, c.ranks, c.site[1] if c.site else None, c.member) for c in log.creations]
        assert creations == [
            ("init", (0, 1), marks["init"], True),
            ("new", (0, 1), marks["new_group"], True),
            ("new", (0,), marks["new_group_0"], r == 0),
            ("new", (0,), marks["new_subgroups"], r == 0),
            ("new", (1,), marks["new_subgroups"], r == 1),
            ("destroy", None, marks["final_barrier"] + 1, True),
        ], f"rank {r}"
    # all_to_all_single: the sizes the signature leaves out are recorded (input shape, splits)
    # and agree pairwise, so the split check finds nothing
    for r, (shape, splits) in {0: ([3], ([1, 2], [1, 2])), 1: ([2], ([2, 0], [2, 0]))}.items():
        (a2s,) = [e for e in events_of(run.ranks[r]) if e.site[1] == marks["all_to_all_single"]]
        assert a2s.tensors == (("float32", tuple(shape)),) and a2s.splits == tuple(map(tuple, splits)), a2s
        assert f"float32[{shape[0]}] splits in {splits[0]} out {splits[1]}" in a2s.describe()
    from collcheck.analysis.diff import analyse

    assert [f.kind for f in analyse(run).findings if f.kind == "split_mismatch"] == []
    # both ranks saw the same group names for the shared groups
    g0 = {e.site[1]: e.group for e in events_of(run.ranks[0])}
    g1 = {e.site[1]: e.group for e in events_of(run.ranks[1])}
    assert g0[marks["group_all_reduce"]] == g1[marks["group_all_reduce"]] != "0"
    assert g0[marks["sub_all_reduce"]] != g1[marks["sub_all_reduce"]]


# ---------------------------------------------------------------------------------------------
# 2. DDP + join()
# ---------------------------------------------------------------------------------------------

def _ddp_step(phase_fwd="DDP forward", rebuild=False):
    labels = [f"{phase_fwd}: not-joined count"]
    if rebuild:
        labels += [f"{phase_fwd}: bucket rebuild"] * 2
    labels += [f"{phase_fwd}: authoritative rank"] + [f"{phase_fwd}: buffer broadcast"] * 2
    labels += [f"{phase_fwd}: backward-sync flag", "DDP backward: gradient bucket 0"]
    return labels


SHADOW = (["join(): not-joined count", "join() shadow: authoritative rank"] + ["join() shadow: buffer broadcast"] * 2
          + ["join() shadow: backward-sync flag", "join() shadow: gradient bucket 0"])
INIT = ["parameter shape check"] * 2 + ["DDP init: module state broadcast"] * 2
FINAL = (["join(): not-joined count", "join() final sync: authoritative rank"]
         + ["join() final sync: module state broadcast"] * 2)


@pytest.mark.parametrize("name", paths("ddp_join", slow_compiled=False))
def test_ddp_join_labels_and_clean_diff(corpus, name):
    from collcheck.analysis.diff import analyse

    script = program("ddp_join.py")
    marks = marker_lines(script)
    rec = corpus(name)
    assert rec.rc == 0, rec.tail()
    run_dir, out = rec.run_dir, rec.stdout
    assert not os.path.exists(os.path.join(run_dir, "live-report.json"))  # join's shadows: not a live finding
    sums = {line.split(",")[1] for line in out.splitlines() if "checksum" in line}
    assert len(sums) == 1, out  # the ranks ended with the same parameters
    run = load_run(run_dir)
    labels = {r: [e.label for e in events_of(log)] for r, log in run.ranks.items()}
    steps = [_ddp_step(rebuild=i == 1) for i in range(5)]
    # rank 0 has 3 batches, rank 1 has 5: rank 0 shadows rank 1's last two steps
    assert labels[0] == INIT + sum(steps[:3], []) + SHADOW * 2 + FINAL
    assert labels[1] == INIT + sum(steps, []) + FINAL
    ev = {r: events_of(log) for r, log in run.ranks.items()}
    for a, b in zip(ev[0], ev[1]):  # same wire order and signatures on both ranks
        assert (a.sig.op, a.sig.tensors, a.sig.reduce_op, a.sig.root, a.sig.role) == \
               (b.sig.op, b.sig.tensors, b.sig.reduce_op, b.sig.root, b.sig.role)
        assert a.completed and b.completed
    for r, events in ev.items():
        for e in events:
            if e.label == "DDP backward: gradient bucket 0":
                assert e.site[1] == marks["backward"] and e.native and e.sig.op == "allreduce_"
            elif e.label.startswith(("join() shadow", "join():", "join() final")):
                assert e.site[1] == marks["join"]
            elif e.label.startswith("DDP forward"):
                assert e.site[1] == marks["forward"]
            else:
                assert e.site[1] == marks["ddp"]
            if "buffer broadcast" in e.label:
                assert e.sig.op == "broadcast_" and e.sig.root == 1  # the last rank to join leads
    bufs = [e for e in ev[0] if e.label.endswith("buffer broadcast")]
    assert {e.sig.tensors for e in bufs} == {(("float32", (16,)),), (("int64", (1,)),)}  # BN running stats
    report = analyse(run)
    assert report.findings == [] and report.verdict == "clean"


# ---------------------------------------------------------------------------------------------
# 3. crash safety, 5. watchdog and SIGTERM dump
# ---------------------------------------------------------------------------------------------

def last_coll(log):
    return log.event(len(log) - 1)


@pytest.mark.parametrize("name", paths("crash_kill", slow_compiled=False))
def test_sigkill_inside_collective_leaves_readable_log(corpus, name):
    script = program("crash.py")
    marks = marker_lines(script)
    rec = corpus(name)
    run_dir = rec.run_dir
    assert rec.rc != 0 and "SIGKILL" in rec.stderr, rec.tail()
    run = load_run(run_dir)
    log = run.ranks[1]
    assert log.junk is None and not log.trailer and log.exception is None
    e = last_coll(log)
    assert e.sig.op == "allreduce_" and e.sig.tensors == (("float32", (7,)),) and e.site[1] == marks["killed"]
    assert not e.completed and e.error is None
    assert log.state == "killed-in-collective"
    assert [x.site[1] for x in events_of(run.ranks[0])] == [marks["barrier"]]
    if name.endswith("@compiled"):  # space reserved ahead of the mapping and never written: not damage
        (path,) = [f for f in log_files(run_dir) if "rank-00001" in f]
        with open(path, "rb") as f:
            assert f.read().endswith(bytes(4096))
        assert not log.damage_notes()


@pytest.mark.parametrize("name", paths("crash_abort"))
def test_size_mismatch_abort_leaves_readable_logs(corpus, name):
    script = program("crash.py")
    marks = marker_lines(script)
    rec = corpus(name)
    run_dir = rec.run_dir
    assert rec.rc != 0 and "SIGABRT" in rec.stderr, rec.tail()
    run = load_run(run_dir)
    assert sorted(run.ranks) == [0, 1]
    # the rank that receives more bytes than it expects aborts (rank 0); its peer raises
    # "Connection closed by peer", unless torchrun's SIGTERM comes first
    aborted = [r for r, log in run.ranks.items() if log.exception is None and not log.trailer]
    assert 0 in aborted, {r: log.state for r, log in run.ranks.items()}
    for r, log in run.ranks.items():
        assert log.junk is None
        e = last_coll(log)
        assert e.sig.op == "allreduce_" and e.site[1] == marks["mismatch"]
        assert e.sig.tensors == (("float32", (4 if r == 0 else 8,)),)
        assert not e.completed
        if r == 0:  # the fatal signal's dump beside the log tells a crash from a kill
            assert log.state == "crashed" and log.crash == "Fatal Python error: Aborted" and e.error is None
        elif r in aborted:  # killed inside it, or (a race under load) after it returned, before its completion
            assert e.error is None and (log.state == "killed-in-collective"  # was recorded
                                        or (log.state == "killed" and e.index in log.unconfirmed)), log.state
        else:  # the X record names where it was raised: the innermost frame of the user's code
            assert log.state == "raised", log.state
            assert log.exception[2][1:] == (marks["mismatch"], "main"), log.exception
    from collcheck.analysis.diff import analyse

    report = analyse(run)
    assert report.hang.states[0].state == "crashed" and report.hang.root_causes == [0]
    if 1 not in aborted:  # rank 1 failed at once: the report says so instead of "wait for the timeout"
        # (its collective's error record, or, where gloo's callback thread lost the race with the
        # process's exit, the exception raised at the collective's call site)
        assert report.hang.states[1].state == "peer-lost" and report.hang.states[1].blocked[0].error
        hang = [f for f in report.findings if f.kind == "hang"][0]
        assert "rank 0 died of a fatal signal" in hang.gloo and "rank 1 failed at once" in hang.gloo


@pytest.mark.parametrize("name", paths("crash_object"))
def test_rank_killed_in_second_op_of_an_object_collective(corpus, name):
    """An API call of several wire ops: the ops that returned are completed when the next one is
    issued, so a rank killed inside the second reads as blocked there, not in the first."""
    script = program("crash.py")
    marks = marker_lines(script)
    rec = corpus(name)
    assert rec.rc != 0, rec.tail()
    run = load_run(rec.run_dir)
    log = run.ranks[0]
    sizes, data = [e for e in events_of(log) if e.site[1] == marks["object"]]
    assert sizes.call_id == data.call_id is not None
    assert sizes.completed and not data.completed and log.state == "killed-in-collective"
    from collcheck.analysis.diff import analyse

    assert [e.index for e in analyse(run).hang.states[0].blocked] == [data.index]


def _sigterm_dump_complete(run_dir: str) -> bool:
    path = os.path.join(run_dir, "rank-00001.0.sigterm.txt")
    return os.path.exists(path) and "terminated_in_all_reduce" in open(path).read()


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name", paths("watchdog"))  # (made with no other recording beside it)
def test_watchdog_stacks_and_sigterm_dump(tmp_path, name, corpus):
    script = program("crash.py")
    marks = marker_lines(script)
    rec = corpus(name)
    run_dir = rec.run_dir
    # faulthandler's dump can be cut short (a second SIGTERM while it writes, or a thread that
    # exits while it walks the threads: seen on loaded CI machines): more launches before judging
    for attempt in range(2):
        if _sigterm_dump_complete(run_dir):
            break
        rec = launch(rec.job, str(tmp_path / f"try{attempt}"))
        run_dir = rec.run_dir
    assert rec.rc != 0, rec.tail()
    run = load_run(run_dir)
    log = run.ranks[1]
    stuck = [e for e in events_of(log) if e.site[1] == marks["stuck"]]
    assert len(stuck) == 1 and stuck[0].completed  # it waited ~3 s, then completed
    dumps = [w for w in log.watchdog if w["i"] == stuck[0].index]
    assert len(dumps) == 1, log.watchdog
    dump = dumps[0]
    assert dump["op"] == "allreduce_" and dump["waited_s"] >= 1
    # the watchdog wrote a checkpoint first: what a post-mortem of thousands of ranks compares
    points = [r for r in read_log(log.path).records if r["k"] == lf.CHECKPOINT and r.get("w") == "stuck"]
    assert points and stuck[0].index in points[0].get("o", ()) and points[0]["n"] == stuck[0].index + 1
    main = [t for t in dump["threads"] if t["n"] == "MainThread"]
    assert main and [script, marks["stuck"], "stuck_in_all_reduce"] in main[0]["f"]
    # SIGTERM while blocked in the second all_reduce: faulthandler wrote the stacks beside the log
    last = last_coll(log)
    assert last.site[1] == marks["terminated"] and not last.completed
    sigterm = log.path[: -len(".msgpack")] + ".sigterm.txt"
    with open(sigterm) as f:
        text = f.read()
    assert "terminated_in_all_reduce" in text and f'line {marks["terminated"]}' in text
    assert log.sigterm_dump == text
    assert log.crash is None and log.state == "stuck"  # SIGTERM: a kill, not a crash
    # the watchdog's stacks reach the user: `collcheck show` prints every thread's
    shown = run_cli("show", log.path).out
    assert "watchdog: stuck" in shown and f"{script}:{marks['stuck']} in stuck_in_all_reduce()" in shown, shown


# ---------------------------------------------------------------------------------------------
# 4. recording changes nothing the program sees
# ---------------------------------------------------------------------------------------------

def per_rank(stdout: str) -> dict:
    out = defaultdict(list)
    for line in stdout.splitlines():
        rank, _, rest = line.partition(" ")
        if rank.isdigit():
            out[int(rank)].append(rest)
    return dict(out)


@pytest.mark.recordings("results_plain")
@pytest.mark.parametrize("name", paths("results"))
def test_same_results_with_and_without_recording(corpus, name):
    plain, recorded = corpus("results_plain"), corpus(name)
    assert plain.rc == 0, plain.tail()
    assert recorded.rc == 0, recorded.tail()
    run_dir = recorded.run_dir
    a, b = per_rank(plain.stdout), per_rank(recorded.stdout)
    assert sorted(a) == [0, 1] and a == b
    assert any("invalid root rank" in line for line in a[0])
    # the errors the user saw are in the log, on the failing call, verbatim
    run = load_run(run_dir)
    for r, log in run.ranks.items():
        errors = [e.error for e in events_of(log) if e.error]
        shown = [line.split(": ", 1)[1] for line in a[r] if "builtins.RuntimeError" in line]
        assert [m.replace("builtins.", "", 1) for m in shown] == errors
        assert log.state == "finished"


# ---------------------------------------------------------------------------------------------
# 6. forked DataLoader workers, internal recorder error
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", paths("fork_and_fail"))
def test_fork_and_internal_error(corpus, name):
    rec = corpus(name)
    assert rec.rc == 0, rec.tail()
    out, err, run_dir = rec.stdout, rec.stderr, rec.run_dir
    for r in (0, 1):
        assert f"rank {r} loader total [112.0, 128.0]" in out
        for i in range(3):
            assert f"rank {r} after {i}: {[float(3 + 2 * i)] * 3}" in out
        assert f"rank {r} objects [0, 1]" in out
    # forked workers wrote nothing: one log per rank, nothing else but the SIGTERM dump slots
    files = sorted(os.listdir(run_dir))
    assert [f for f in files if f.endswith(".msgpack")] == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"]
    assert all(f.endswith((".msgpack", ".sigterm.txt")) for f in files), files
    assert err.count("collcheck: recording disabled") == 1, err[-3000:]
    assert "Exception ignored" not in err and "Traceback" not in err, err[-3000:]  # fork hooks stay quiet
    run = load_run(run_dir)
    healthy, broken = run.ranks[0], run.ranks[1]
    assert healthy.disabled is None and len(healthy) == 4 + 3 + 2
    assert all(e.completed for e in events_of(healthy))
    assert broken.disabled is not None and "TypeError" in broken.disabled
    assert len(broken) == 4 and all(e.completed for e in events_of(broken))


# ---------------------------------------------------------------------------------------------
# 7. the Python API in a world-size-1 job
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", paths("api_world1", slow_compiled=False))
def test_enable_disable_and_recording_context(corpus, name):
    """Also: no kernel stays registered once recording is off or paused (the dispatcher runs
    c10d's ops as without collcheck), they come back with the next recording and on resuming; the
    compiled path maps its log."""
    script = program("api_world1.py")
    marks = marker_lines(script)
    proc = corpus(name)
    assert proc.rc == 0, proc.tail()
    tmp_path = Path(proc.run_dir)
    assert "value [1.0, 1.0, 1.0]" in proc.stdout and "patched False" in proc.stdout
    assert "registered after disable False" in proc.stdout and "registered while recording True" in proc.stdout
    assert "registered while paused False" in proc.stdout and "registered after resuming True" in proc.stdout
    assert ("mapped True" if name.endswith("@compiled") else "mapped None") in proc.stdout
    enabled = load_run(str(tmp_path / "enabled" / "enabled"))
    assert f"disabled {log_files(str(tmp_path / 'enabled' / 'enabled'))[0]}" in proc.stdout
    log = enabled.ranks[0]
    assert [(e.sig.op, e.site[1]) for e in events_of(log)] == [("allreduce_", marks["enabled_all_reduce"])]
    assert log.state == "finished" and log.world == 1
    ctx = load_run(str(tmp_path / "ctx" / "ctx")).ranks[0]
    assert [(e.sig.op, e.site[1]) for e in events_of(ctx)] == [("broadcast_", marks["ctx_broadcast"]),
                                                              ("barrier", marks["ctx_barrier"]),
                                                              ("allreduce_", marks["ctx_resumed"])]
    assert ctx.state == "finished"


@pytest.mark.parametrize("name", paths("compiled_fn"))
def test_compile_tracing_is_not_recorded(corpus, name):
    """torch.compile traces with fake tensors: those calls must not appear in the log; the compiled
    graph's functional collectives do, labelled as such."""
    script = program("compiled.py")
    proc = corpus(name)
    assert proc.rc == 0, proc.tail()
    assert "value [3.0, 3.0, 3.0, 3.0]" in proc.stdout
    log = load_run(os.path.join(proc.run_dir, "compiled")).ranks[0]
    ops = [e.sig.op for e in events_of(log)]
    assert ops == ["allreduce_"] * 3, ops
    # the compiled function (not torch.fx's generated code: Dynamo's code for `step` runs the graph from
    # its first line, the decorator's), labelled alike on every call (the first goes through AOT
    # autograd's dispatch, the later ones straight from the graph)
    seen = {(e.site[1], e.site[2], e.label) for e in events_of(log)}
    assert seen == {(marker_lines(script)["compiled"], "step", "torch.compile graph: functional collective")}, seen


@pytest.mark.parametrize("name", paths("non_member"))
def test_call_on_a_group_the_rank_is_not_in(corpus, name):
    """torch skips a collective on a group the rank is not in, with one warning: the log keeps the
    call (N record), and diff names it before the hang it causes."""
    script = program("non_member.py")
    marks = marker_lines(script)
    rec = corpus(name)
    assert rec.rc != 0, rec.tail()
    run = load_run(rec.run_dir)
    assert [(api, site[1]) for api, site, _ in run.ranks[1].non_member] == [("all_reduce", marks["skipped"])]
    assert not run.ranks[0].non_member and not run.ranks[2].non_member
    from collcheck.analysis.diff import analyse

    first, second = analyse(run).findings[:2]
    assert (first.kind, first.ranks) == ("non_member_call", [1])
    assert f"all_reduce at non_member.py:{marks['skipped']}" in first.message
    assert "rank 1 is not in the groups of ranks [2]" in first.message
    # rank 0 waits in {0, 1} for rank 1, which waits in the world barrier for rank 0
    assert (second.kind, second.ranks, second.events[0].site[1]) == ("deadlock", [0, 1], marks["skipped"])
    res = run_cli("diff", "--format", "junit", rec.run_dir)
    assert res.code == 1 and 'type="non_member_call"' in res.out, res.out + res.err


@pytest.mark.parametrize("name", paths("frameworks"))
def test_framework_collectives_are_labelled_by_their_framework(corpus, name):
    """FSDP2's and FSDP1's collectives are FSDP's (the module's phase, never DDP's or join()'s), DTensor's are
    named by the user's DTensor call and the placement change over the mesh dimension, DDP keeps
    its labels, a user's call has none."""
    script = program("frameworks.py")
    marks = marker_lines(script)
    rec = corpus(name)
    assert rec.rc == 0, rec.tail()
    run = load_run(rec.run_dir)
    for rank, log in run.ranks.items():
        phases, phase = {}, None
        for e in events_of(log):
            if e.label is None and e.sig.tensors and e.sig.tensors[0][1] in ((101,), (102,), (103,), (104,), (105,)):
                phase = {(101,): "fsdp", (102,): "dtensor", (103,): "ddp", (104,): "fsdp1", (105,): "end"}[e.sig.tensors[0][1]]
                continue
            phases.setdefault(phase, []).append(e)
        fsdp, dtensor, ddp = phases["fsdp"], phases["dtensor"], phases["ddp"]
        # each FSDP unit's own collectives, by its module's name (the root holds no parameter of its own)
        assert {e.sig.role for e in fsdp} == {f"FSDP {what} of {m}" for what in ("unshard all-gather", "gradient reduce")
                                             for m in ("0", "2")}, {e.sig.role for e in fsdp}
        labels = {e.label for e in fsdp}
        assert {"FSDP2 forward: FSDP unshard all-gather of 0", "FSDP2 backward: FSDP gradient reduce of 2"} <= labels, \
            labels
        assert all(e.label.startswith("FSDP2 ") for e in fsdp), labels
        # the DTensor call on each line, with torch's step that communicated
        dtensor_labels = {(e.site[1], e.label) for e in dtensor}
        assert dtensor_labels == {(marks["distribute"], "distribute_tensor(): scatter over dp"),
                                  (marks["full_tensor"], "DTensor.full_tensor(): Shard(0) -> Replicate() over dp"),
                                  (marks["redistribute"], "DTensor.redistribute(): Shard(0) -> Replicate() over dp"),
                                  (marks["implicit"], "DTensor aten.mm.default (implicit redistribution of argument 1): "
                                                      "Shard(0) -> Replicate() over dp")}, \
            dtensor_labels
        assert all(e.sig.role is None for e in dtensor)
        assert {e.label.rstrip(" 0123456789") for e in ddp} == {
            "parameter shape check", "DDP init: module state broadcast", "DDP backward: gradient bucket"}, \
            {e.label for e in ddp}
        assert any(e.label.startswith("DDP backward: gradient bucket") for e in ddp), {e.label for e in ddp}
        # FSDP1: the root unit (the outer Linear) and the nested one (module "2"), forward and backward
        assert [e.label for e in phases["fsdp1"]] == [
            "FSDP forward: FSDP unshard all-gather of the root module", "FSDP forward: FSDP unshard all-gather of 2",
            "FSDP backward: FSDP unshard all-gather of 2", "FSDP backward: FSDP gradient reduce of 2",
            "FSDP backward: FSDP gradient reduce of the root module"], [e.label for e in phases["fsdp1"]]
        every = [e for es in phases.values() for e in es]
        assert not any(("DDP" in (e.label or "") or "join()" in (e.label or "")) for e in fsdp + dtensor + phases["fsdp1"])
        assert len(every) > 10


@pytest.mark.slow  # (the default run checks the chains of chains.py's extra_forward run: test_chains.py)
@pytest.mark.parametrize("name", paths("chains"))
def test_every_collective_carries_the_users_call_chain(corpus, name):
    """The chain from the program's outermost frame to the call site, with torch's frames (nn.Module's
    call machinery) left out; one interned chain per way the program reaches the call."""
    script = program("chains.py")
    marks = marker_lines(script)
    rec = corpus(name)
    assert rec.rc == 0, rec.tail()
    run = load_run(rec.run_dir)
    for log in run.ranks.values():
        chains = {tuple((os.path.basename(f), line, fn) for f, line, fn in e.chain) for e in events_of(log)
                  if e.sig.op in ("allgather_", "allreduce_")}
        name = os.path.basename(script)
        gather = ((name, marks["main"], "<module>"), (name, marks["train_call"], "main"),
                  (name, marks["train_forward"], "train_step"), (name, marks["stats_gather"], "forward"))
        assert gather in chains, chains
        assert all(c[0] == (name, marks["main"], "<module>") for c in chains), chains
        assert len(log.chain_sites) == len(set(log.chain)), log.chain_sites  # every key used resolves
