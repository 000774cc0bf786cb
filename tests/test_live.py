"""Live mode: the ranks' summaries, the checker's suspicions and the reports of running jobs.

The detector is tested on summaries built with the recorder's own hash functions (live_hash);
the rest on real torchrun jobs: every hanging or mismatching scenario reported while it runs (on
the simulated NCCL backend, group timeouts of 60 s), the job ended by COLLCHECK_LIVE_ACTION=abort,
`collcheck diff` of a job that still runs, two torchrun "nodes", PyTorch's own distributed tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import base_env, diff_json, free_port, program
from hypothesis import given, settings
from hypothesis import strategies as st

from collcheck.capture import live_hash
from collcheck.capture.live_detect import Detector
from collcheck.demo import SCENARIOS_DIR, record_scenario, scenario_meta, scenario_names

sys.path.insert(0, os.path.dirname(__file__))
from test_tui import drive, plain  # noqa: E402

HANG_S = 1.5


def group_entry(sigs: list[int], size: int = 0, balances: dict | None = None) -> list:
    """A group's entry in a summary, as Recorder.live_state builds it from these signatures."""
    table: dict = {}
    for j, s in enumerate(sigs):
        live_hash.mix(table, 0, j, s)
    h, ring = table.get(0, (0, [0] * live_hash.RING))
    return [len(sigs), h, live_hash.ring_bytes(ring, len(sigs)), size, balances or {}]


def summary(q: int, groups: dict, e: int = 0, waiting: float | None = None, state: str | None = None,
            idle: float = 0.0, channels: dict | None = None) -> dict:
    s = {"v": 1, "q": q, "e": e, "g": groups, "c": channels or {}, "m": idle}
    if waiting is not None:
        s["f"] = [e - 1, waiting, "allreduce_", 1]
    if state:
        s["s"] = state
    return s


# -- the detector --------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=150), st.integers(2, 4), st.data())
def test_a_slot_where_signatures_differ_is_suspected_there_and_nowhere_else(sigs, world, data):
    det = Detector(world, HANG_S, 5.0)
    same = {r: summary(1, {"0": group_entry(sigs)}, e=len(sigs)) for r in range(world)}
    assert det.update(0.0, same) is None
    rank = data.draw(st.integers(0, world - 1))
    extra = data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=80))
    changed = data.draw(st.integers(0, len(extra) - 1))
    others = list(extra)
    others[changed] = (others[changed] + 1) % 2**32  # one rank issues something else there
    seqs = {r: sigs + (others if r == rank else extra) for r in range(world)}
    found = det.update(1.0, {r: summary(2, {"0": group_entry(s)}, e=len(s)) for r, s in seqs.items()})
    assert found is not None and found.kind == "divergence"
    assert (found.group, found.position) == ("0", len(sigs) + changed)
    det.clear(found)  # the analysis found nothing there: the next slots are compared on
    assert det.update(2.0, {r: summary(3, {"0": group_entry(s)}, e=len(s)) for r, s in seqs.items()}) is None


def test_ranks_further_apart_than_the_window_are_compared_where_they_overlap():
    det = Detector(2, HANG_S, 5.0)
    behind, ahead = list(range(10)), list(range(200))
    ahead[5] = 999  # out of the leader's window by now: not comparable, not a suspicion
    assert det.update(0.0, {0: summary(1, {"0": group_entry(behind)}), 1: summary(1, {"0": group_entry(ahead)})}) is None


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 5), st.data())
def test_all_to_all_balances_cancel_exactly_when_split_sizes_agree(size, data):
    matrix = [[data.draw(st.integers(0, 1000)) for _ in range(size)] for _ in range(size)]  # i sends j
    splits = {i: ([matrix[i][j] for j in range(size)], [matrix[j][i] for j in range(size)]) for i in range(size)}
    total = sum(live_hash.a2a_balance(splits[i], i, size) for i in range(size))
    assert total % 2**32 == 0
    i, j = data.draw(st.integers(0, size - 1)), data.draw(st.integers(0, size - 1))
    outs = list(splits[i][1])
    outs[j] += data.draw(st.integers(1, 50))  # rank i expects more from j than j sends
    wrong = dict(splits)
    wrong[i] = (splits[i][0], outs)
    assert sum(live_hash.a2a_balance(wrong[k], k, size) for k in range(size)) % 2**32 != 0


def test_an_all_to_all_whose_sizes_do_not_add_up_is_suspected():
    det = Detector(2, HANG_S, 5.0)
    ok = {0: live_hash.a2a_balance(([1, 2], [1, 3]), 0, 2), 1: live_hash.a2a_balance(([3, 4], [2, 4]), 1, 2)}
    bad = {0: ok[0], 1: live_hash.a2a_balance(([3, 4], [5, 4]), 1, 2)}
    sig = [7]
    assert det.update(0.0, {r: summary(1, {"0": group_entry(sig, 2, {0: ok[r]})}) for r in (0, 1)}) is None
    det = Detector(2, HANG_S, 5.0)
    found = det.update(0.0, {r: summary(1, {"0": group_entry(sig, 2, {0: bad[r]})}) for r in (0, 1)})
    assert found is not None and (found.kind, found.position) == ("divergence", 0)


def test_sends_are_compared_with_the_peers_recvs():
    det = Detector(2, HANG_S, 5.0)
    send = group_entry([1, 2, 3])[:3]
    recv_ok, recv_bad = group_entry([1, 2, 3])[:3], group_entry([1, 5, 3])[:3]
    assert det.update(0.0, {0: summary(1, {}, channels={"0>1": send}), 1: summary(1, {}, channels={"0<0": recv_ok})}) is None
    found = Detector(2, HANG_S, 5.0).update(0.0, {0: summary(1, {}, channels={"0>1": send}),
                                                  1: summary(1, {}, channels={"0<0": recv_bad})})
    assert found is not None and (found.group, found.position, found.ranks) == ("0", 1, [0, 1])


def test_a_busy_rank_makes_a_straggler_not_a_hang():
    det = Detector(2, HANG_S, 5.0)
    g = {"0": group_entry([1, 2])}
    for t in range(6):  # rank 0 waits in a collective for 5 s; rank 1 computes (publishing, nothing in flight)
        assert det.update(float(t), {0: summary(t, g, e=2, waiting=float(t), idle=float(t)),
                                     1: summary(t, g, e=2, idle=float(t))}) is None


def test_nothing_moving_while_every_rank_waits_is_a_hang_until_cleared():
    det = Detector(2, HANG_S, 5.0)
    g = {"0": group_entry([1, 2])}
    ranks = lambda t, q: {r: summary(q, g, e=2, waiting=t, idle=t) for r in (0, 1)}  # noqa: E731
    assert det.update(0.5, ranks(0.5, 1)) is None  # not yet: something moved half a second ago
    found = det.update(2.0, ranks(2.0, 2))
    assert found is not None and found.kind == "hang" and found.ranks == [0, 1]
    det.clear(found)  # the analysis found nothing (every member inside the same collective)
    assert det.update(3.0, ranks(3.0, 3)) is None  # asked once per frozen state


def test_a_rank_that_exited_while_the_others_wait_is_a_hang():
    det = Detector(2, HANG_S, 5.0)
    g = {"0": group_entry([1, 2])}
    assert det.update(3.0, {0: summary(1, g, e=2, waiting=3.0, idle=3.0), 1: summary(1, g, e=2, state="end")}).kind == "hang"


def test_ranks_that_ended_with_unequal_counts_are_suspected_at_the_end():
    det = Detector(2, HANG_S, 5.0)
    short, long = {"0": group_entry([1, 2])}, {"0": group_entry([1, 2, 3])}
    assert det.update(0.0, {0: summary(1, short, state="end"), 1: summary(1, short, state="end")}) is None
    assert det.finished()
    det = Detector(2, HANG_S, 5.0)
    found = det.update(0.0, {0: summary(1, short, state="end"), 1: summary(1, long, state="end")})
    assert found is not None and found.kind == "end"
    det.clear(found)
    assert det.finished()
    det = Detector(2, HANG_S, 5.0)  # rank 1's recording stopped after an internal error: fewer in its log
    stopped = dict(summary(1, short, state="end"), x=1)
    assert det.update(0.0, {0: summary(1, long, state="end"), 1: stopped}) is None and det.finished()


# -- running jobs -----------------------------------------------------------------------------------

NOT_VALID = [n for n in scenario_names() if not scenario_meta(n)["valid"]]
DEFAULT_RUN = {"missing_barrier", "dtype_mismatch"}  # a hang (a rank left) and a silent mismatch: the rest -m slow
LIVE_ENV = {"COLLCHECK_SIMNCCL": "1", "SCENARIO_TIMEOUT_S": "60"}


def expected_first(name: str, backend: str) -> tuple:
    with open(os.path.join(SCENARIOS_DIR, name, "expected.json")) as f:
        expected = json.load(f)
    first = (expected.get("simnccl", expected) if backend == "simnccl" else expected)["findings"][0]
    return first["kind"], first["group"], first["position"], first["ranks"]


def first_of(report: dict) -> tuple:
    f = report["findings"][0]
    return f["kind"], f["group"], f["position"], f["ranks"]


def live_report(run_dir: str) -> dict:
    path = os.path.join(run_dir, "live-report.json")
    assert os.path.exists(path), f"no live report in {run_dir}: {os.listdir(run_dir)}"
    with open(path) as f:
        return json.load(f)


def check_live_run(name: str, backend: str, tmp_path) -> None:
    """The scenario on `backend` with group timeouts of 60 s and COLLCHECK_LIVE_ACTION=abort: the
    live report within 5 s of the divergence, the post-mortem's first finding (the scenario's
    expected one), the job over within 10 s of the divergence."""
    env = dict(LIVE_ENV, COLLCHECK_LIVE_ACTION="abort")
    if backend == "gloo":
        env.pop("COLLCHECK_SIMNCCL")
    rc, run_dir, output = record_scenario(name, str(tmp_path), timeout=120, extra_env=env)
    ended = time.time()
    assert rc != -1, output[-3000:]
    report = live_report(run_dir)
    live = report["live"]
    _, post = diff_json(run_dir)
    assert first_of(report) == first_of(post) == expected_first(name, backend), output[-3000:]
    assert live["reported_wall"] - live["divergence_wall"] <= 5.0, live
    assert ended - live["divergence_wall"] <= 10.0, (ended, live)
    assert "collcheck live: " in output  # on the job's stderr too


@pytest.mark.timeout(150)
@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT_RUN else pytest.mark.slow) for n in NOT_VALID])
def test_live_report_names_the_first_finding_while_the_job_runs(name, tmp_path):
    check_live_run(name, "simnccl", tmp_path)


def _gloo_verdict(name: str) -> str:
    with open(os.path.join(SCENARIOS_DIR, name, "expected.json")) as f:
        return json.load(f)["verdict"]


GLOO_HANGS = [n for n in NOT_VALID if _gloo_verdict(n) in ("hang", "deadlock")]  # (the others fail at once)


@pytest.mark.slow
@pytest.mark.timeout(150)
@pytest.mark.parametrize("name", GLOO_HANGS)
def test_live_report_on_gloo_hangs(name, tmp_path):
    check_live_run(name, "gloo", tmp_path)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (torchrun, its ranks, their helpers), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo, found = [pid], []
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    for p in found:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.timeout(150)
def test_diff_of_a_running_job_is_a_snapshot(tmp_path):
    """A job that hangs (live mode reports, not abort): `collcheck diff` and the TUI read its logs
    while it runs, marked as a snapshot; the live report is on the job's stderr and in the run
    directory."""
    env = base_env(tmp_path, extra=dict(LIVE_ENV, COLLCHECK_RUN_ID="snap"))
    script = os.path.join(SCENARIOS_DIR, "missing_barrier", "main.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), script]
    job = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = os.path.join(str(tmp_path), "snap")
    try:
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(run_dir, "live-report.json")) and time.time() < deadline:
            time.sleep(0.2)
        assert job.poll() is None, "the job ended before it was read"
        report = live_report(run_dir)
        assert first_of(report) == expected_first("missing_barrier", "simnccl")
        code, snap = diff_json(run_dir)
        assert code == 1 and snap["snapshot"] == {"running": [0]}  # rank 1 has left
        assert snap["ranks"]["0"]["state"] == "running-in-collective" and first_of(snap) == first_of(report)
        text = subprocess.run([sys.executable, "-m", "collcheck", "diff", run_dir], capture_output=True, text=True,
                              timeout=60).stdout
        assert "SNAPSHOT of a running job: rank 0 still running" in text
        with open(os.path.join(run_dir, "live-report.txt")) as f:
            assert f.read().startswith("collcheck live: ")

        async def script(pilot, app):
            assert "SNAPSHOT: rank 0 still running" in plain(app, "#summary-line")

        drive(run_dir, script)
    finally:
        kill_tree(job.pid)
        _, err = job.communicate(timeout=60)
    assert "collcheck live: " in err  # the report on the job's stderr


@pytest.mark.timeout(150)
def test_two_torchrun_nodes_are_checked_across_both(tmp_path):
    """Two torchrun agents ("nodes", c10d rendezvous on loopback), two ranks each; rank 3, on the
    second node, skips a barrier: the checker on rank 0 names it."""
    port, run_id = free_port(), "nodes"
    env = base_env(tmp_path, extra=dict(COLLCHECK_SIMNCCL="1", COLLCHECK_LIVE_ACTION="abort"))  # (the
    # rendezvous id names the run on both nodes)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend",
           "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id, "--max-restarts", "0",
           program("live_nodes.py")]
    nodes = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in nodes]
    run_dir = os.path.join(str(tmp_path), run_id)
    report = live_report(run_dir)
    first = report["findings"][0]
    assert (first["kind"], first["ranks"]) == ("missing", [3]), outs[0][1][-3000:]
    assert sorted(report["ranks"]) == ["0", "1", "2", "3"]
    assert report["live"]["reported_wall"] - report["live"]["divergence_wall"] <= 5.0
    assert all(p.returncode != 0 for p in nodes)  # ended by the abort, long before the 60 s timeout


TORCH_TESTS = ["test_all_reduce_sum", "test_all_reduce_sum_async", "test_broadcast", "test_barrier", "test_send_recv",
               "test_send_recv_any_source", "test_send_recv_with_tag", "test_isend", "test_batch_isend_irecv_gloo",
               "test_all_gather_object_default_pg", "test_all_gather_object_subgroup", "test_scatter_object_list",
               "test_DistributedDataParallelCPU", "test_DistributedDataParallelCPU_grad_is_view",
               "test_ddp_logging_data_cpu", "test_static_graph_api_cpu"]
# (these run on CPU with two ranks; the others of the file, DDP's join tests among them, need GPUs
# or four ranks, or are skipped upstream: join runs in scenarios/join_uneven_inputs and seed 004)
TORCH_TESTS_DEFAULT = ["test_send_recv_with_tag", "test_all_gather_object_subgroup", "test_DistributedDataParallelCPU"]


def run_torch_tests(names: list[str], tmp_path) -> None:
    """PyTorch's distributed tests under COLLCHECK=1: they pass, every rank is recorded, and live
    mode reports nothing (DDP's join, P2P, object collectives, subgroups are all valid)."""
    env = base_env(tmp_path)
    proc = subprocess.run([sys.executable, program("torch_distributed_tests.py"), *names], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    output = proc.stdout + proc.stderr
    assert "collcheck live" not in output and "live mode off" not in output, proc.stderr[-4000:]  # on, silent
    for name in names:
        run_dir = os.path.join(str(tmp_path), name)
        logs = sorted(f for f in os.listdir(run_dir) if f.endswith(".msgpack"))
        assert len(logs) == 2 and "live-report.json" not in os.listdir(run_dir), (name, os.listdir(run_dir))


@pytest.mark.timeout(300)
def test_pytorchs_own_distributed_tests_raise_no_live_report(tmp_path):
    run_torch_tests(TORCH_TESTS_DEFAULT, tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_more_of_pytorchs_distributed_tests_raise_no_live_report(tmp_path):
    run_torch_tests([n for n in TORCH_TESTS if n not in TORCH_TESTS_DEFAULT], tmp_path)


def serve_store():
    """A TCPStore served by a process of its own (killed to make the job's store fail)."""
    port = free_port()
    code = (f"import torch.distributed as d, time; s = d.TCPStore('127.0.0.1', {port}, 1, True, "
            "wait_for_workers=False); print('up', flush=True); time.sleep(120)")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "up"
    return server, port


@pytest.mark.timeout(120)
def test_a_store_that_fails_turns_live_mode_off_with_one_warning(tmp_path):
    server, port = serve_store()
    try:
        job = subprocess.Popen([sys.executable, program("live_store.py"), "fail", str(port)], env=base_env(tmp_path),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert job.stdout.readline().strip() == "running"
        time.sleep(1.0)  # a few summaries published
        server.kill()
        out, err = job.communicate(timeout=60)
    finally:
        server.kill()
    assert job.returncode == 0 and out.strip() == "done", err[-3000:]
    assert err.count("collcheck: live mode off") == 1, err[-3000:]


@pytest.mark.timeout(120)
def test_nothing_is_published_once_recording_stops(tmp_path):
    server, port = serve_store()
    try:
        proc = subprocess.run([sys.executable, program("live_store.py"), "pause", str(port)], env=base_env(tmp_path),
                              capture_output=True, text=True, timeout=60)
    finally:
        server.kill()
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, before, after, state = proc.stdout.split()
    assert int(before) > 1 and before == after and state == "end", proc.stdout  # published, then its last word
