"""Live mode on real torchrun jobs: every hanging or mismatching scenario reported while it runs
(on the simulated NCCL backend, group timeouts of 60 s), the job ended by
COLLCHECK_LIVE_ACTION=abort, `collcheck diff` of a job that still runs, two torchrun "nodes",
PyTorch's own distributed tests, a store that fails. The jobs' timing is what these tests check:
each starts its own (`solo`: after the shared recordings, with nothing else running), but for the
snapshot's, which only needs its job to hang (60 s) until it is read.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from support.cli import diff_json, run_cli
from support.corpus import params, scenario_meta, scenario_names
from support.jobs import SCENARIOS, base_env, free_port, marker_lines, program
from support.tui import drive, plain

from collcheck.model import load_run

# -- running jobs -----------------------------------------------------------------------------------

NOT_VALID = [n for n in scenario_names() if not scenario_meta(n)["valid"]]
# the default run: a silent mismatch, ended by the abort (a hang that a rank left, missing_barrier, is
# reported live by test_diff_of_a_running_job_is_a_snapshot); the rest -m slow
DEFAULT_RUN = {"dtype_mismatch"}
LIVE_ENV = {"COLLCHECK_SIMNCCL": "1", "SCENARIO_TIMEOUT_S": "60"}
SCENARIOS_DIR = str(SCENARIOS)


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


def check_live_run(corpus, name: str, backend: str) -> None:
    """The scenario on `backend` with group timeouts of 60 s and COLLCHECK_LIVE_ACTION=abort, with
    no other recording beside it (support/corpus.py): the live report within 5 s of the
    divergence, the post-mortem's first finding (the scenario's expected one), the job over within
    10 s of the divergence."""
    rec = corpus(f"live:{name}@{backend}")
    ended = rec.ended_wall
    run_dir, output = rec.run_dir, rec.output
    assert rec.rc is not None, rec.tail()
    report = live_report(run_dir)
    live = report["live"]
    _, post = diff_json(run_dir)
    assert first_of(report) == first_of(post) == expected_first(name, backend), output[-3000:]
    assert live["reported_wall"] - live["divergence_wall"] <= 5.0, live
    assert ended - live["divergence_wall"] <= 10.0, (ended, live)
    assert "collcheck live: " in output  # on the job's stderr too


@pytest.mark.parametrize("name", params(NOT_VALID, lambda n: f"live:{n}@simnccl", default=DEFAULT_RUN))
def test_live_report_names_the_first_finding_while_the_job_runs(name, corpus):
    check_live_run(corpus, name, "simnccl")


def _gloo_verdict(name: str) -> str:
    with open(os.path.join(SCENARIOS_DIR, name, "expected.json")) as f:
        return json.load(f)["verdict"]


GLOO_HANGS = [n for n in NOT_VALID if _gloo_verdict(n) in ("hang", "deadlock")]  # (the others fail at once)


@pytest.mark.parametrize("name", params(GLOO_HANGS, lambda n: f"live:{n}@gloo", slow=GLOO_HANGS))
def test_live_report_on_gloo_hangs(name, corpus):
    check_live_run(corpus, name, "gloo")


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


@pytest.mark.slow
@pytest.mark.timeout(150)
def test_diff_of_a_running_job_is_a_snapshot(tmp_path):
    """A job that hangs (live mode reports, not abort): `collcheck diff` and the TUI read its logs
    while it runs, marked as a snapshot; the live report is on the job's stderr and in the run
    directory."""
    env = base_env(tmp_path, extra=dict(LIVE_ENV, COLLCHECK_RUN_ID="snap"))
    script = os.path.join(SCENARIOS_DIR, "missing_barrier", "main.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()), script]
    running = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run_dir = os.path.join(str(tmp_path), "snap")
    try:
        deadline = time.time() + 60
        while not os.path.exists(os.path.join(run_dir, "live-report.json")) and time.time() < deadline:
            time.sleep(0.2)
        assert running.poll() is None, "the job ended before it was read"
        report = live_report(run_dir)
        assert first_of(report) == expected_first("missing_barrier", "simnccl")
        code, snap = diff_json(run_dir)
        assert code == 1 and snap["snapshot"] == {"running": [0]}  # rank 1 has left
        assert snap["ranks"]["0"]["state"] == "running-in-collective" and first_of(snap) == first_of(report)
        text = run_cli("diff", run_dir).out
        assert "SNAPSHOT of a running job: rank 0 still running" in text
        with open(os.path.join(run_dir, "live-report.txt")) as f:
            assert f.read().startswith("collcheck live: ")

        async def script(pilot, app):
            assert "SNAPSHOT: rank 0 still running" in plain(app, "#summary-line")

        drive(run_dir, script)
    finally:
        kill_tree(running.pid)
        _, err = running.communicate(timeout=60)
    assert "collcheck live: " in err  # the report on the job's stderr


def two_nodes(dirs: list[str], script: str, run_id: str, extra: dict) -> list[subprocess.Popen]:
    """Two torchrun agents ("nodes", c10d rendezvous on loopback), two ranks each, started together,
    node i recording into dirs[i] (one folder for both: a shared filesystem). The rendezvous
    assigns the ranks: ranks 0-1 on the agent that joins first (not --node-rank's)."""
    port = free_port()
    nodes = []
    for i, log_dir in enumerate(dirs):
        env = base_env(log_dir, extra=extra)  # (the rendezvous id names the run on both nodes)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(i), "--nproc-per-node",
               "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", run_id,
               "--max-restarts", "0", script]
        nodes.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    return nodes


def finish(nodes: list[subprocess.Popen], timeout: float) -> list[tuple[str, str]]:
    """Every node's (stdout, stderr); a node still running after `timeout` s is killed (with its ranks)."""
    deadline, outs = time.monotonic() + timeout, []
    for p in nodes:
        try:
            outs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            kill_tree(p.pid)
            outs.append(p.communicate(timeout=30))
    return outs


@pytest.mark.slow
@pytest.mark.solo
@pytest.mark.timeout(150)
def test_two_torchrun_nodes_are_checked_across_both(tmp_path):
    """Two torchrun agents on a shared folder; rank 3, on the second node, skips a barrier and
    exits: the checker on rank 0 names it."""
    run_id = "nodes"
    nodes = two_nodes([str(tmp_path)] * 2, program("live_nodes.py"), run_id,
                      dict(COLLCHECK_SIMNCCL="1", COLLCHECK_LIVE_ACTION="abort"))
    outs = finish(nodes, 120)
    run_dir = os.path.join(str(tmp_path), run_id)
    report = live_report(run_dir)
    first = report["findings"][0]
    assert (first["kind"], first["ranks"]) == ("missing", [3]), outs[0][1][-3000:]
    assert sorted(report["ranks"]) == ["0", "1", "2", "3"]
    assert report["live"]["reported_wall"] - report["live"]["divergence_wall"] <= 5.0
    assert all(p.returncode != 0 for p in nodes)  # ended by the abort, long before the 60 s timeout


def logs_in(folder: str) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".msgpack"))


def without_paths(report: dict, *folders: str) -> dict:
    """A JSON report with the run's folder left out and the given folders' paths made alike."""
    text = json.dumps({k: v for k, v in report.items() if k != "run"})
    for folder in folders:
        text = text.replace(folder, "<run>")
    return json.loads(text)


@pytest.mark.slow
@pytest.mark.solo
@pytest.mark.timeout(200)
def test_two_nodes_with_folders_of_their_own_are_reported_whole_through_the_store(tmp_path):
    """Each node records into a folder of its own (no shared filesystem), on gloo; rank 3, on the
    second node to join, skips a barrier and waits in the next all_reduce. The live report names it
    with every rank's collectives, the other node's from the store alone (the checking node's
    folder holds only its own ranks' logs); `collcheck diff node0/ node1/` afterwards reports what
    `collcheck diff` does on one folder holding both nodes' logs."""
    run_id = "ownfolders"
    folders = [str(tmp_path / "node0"), str(tmp_path / "node1")]
    nodes = two_nodes(folders, program("live_nodes_skip.py"), run_id, dict(COLLCHECK_LIVE_ACTION="abort"))
    outs = finish(nodes, 150)
    runs = [os.path.join(f, run_id) for f in folders]
    checking = [r for r in runs if os.path.exists(os.path.join(r, "live-report.json"))]
    assert len(checking) == 1, (os.listdir(runs[0]), os.listdir(runs[1]), [e[-3000:] for _, e in outs])
    here, other = checking[0], next(r for r in runs if r not in checking)
    assert logs_in(here) == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"]
    assert logs_in(other) == ["rank-00002.0.msgpack", "rank-00003.0.msgpack"]
    report = live_report(here)
    first = report["findings"][0]
    assert (first["group"], first["position"], first["ranks"]) == ("0", 3, [3]), first
    assert sorted(report["ranks"]) == ["0", "1", "2", "3"] and report["live"]["logs"] == []
    assert {r: report["ranks"][r]["collectives"] for r in ("2", "3")} == {"2": 4, "3": 4}, report["ranks"]
    with open(os.path.join(here, "live-report.txt")) as f:
        text = f.read()
    after = marker_lines(program("live_nodes_skip.py"))["after"]
    assert "culprit rank 3" in text and f"live_nodes_skip.py:{after}" in text  # rank 3's own call, from the store
    assert "collcheck live: " in outs[folders.index(os.path.dirname(here))][1]  # on the checking node's stderr
    assert all(p.returncode != 0 for p in nodes)  # ended by the abort, long before the 60 s timeout
    # afterwards: both nodes' folders given together, as one folder holding every log
    both = tmp_path / "both"
    both.mkdir()
    for run in runs:
        for name in logs_in(run):
            shutil.copy(os.path.join(run, name), both / name)
    _, apart = diff_json_of(folders)
    _, together = diff_json(str(both))
    assert without_paths(apart, *runs) == without_paths(together, str(both))
    assert apart["findings"][0]["ranks"] == [3] and len(apart["ranks"]) == 4


def diff_json_of(folders: list[str]) -> tuple[int, dict]:
    """`collcheck diff FOLDER... --format json`."""
    res = run_cli("diff", *folders, "--format", "json")
    assert res.code in (0, 1), (res.code, res.err)
    return res.code, json.loads(res.out)


TORCH_TESTS = ["test_all_reduce_sum", "test_all_reduce_sum_async", "test_broadcast", "test_barrier", "test_send_recv",
               "test_send_recv_any_source", "test_send_recv_with_tag", "test_isend", "test_batch_isend_irecv_gloo",
               "test_all_gather_object_default_pg", "test_all_gather_object_subgroup", "test_scatter_object_list",
               "test_DistributedDataParallelCPU", "test_DistributedDataParallelCPU_grad_is_view",
               "test_ddp_logging_data_cpu", "test_static_graph_api_cpu"]
# (these run on CPU with two ranks; the others of the file, DDP's join tests among them, need GPUs
# or four ranks, or are skipped upstream: join runs in scenarios/join_uneven_inputs and seed 004)


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


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_pytorchs_own_distributed_tests_raise_no_live_report(tmp_path):
    run_torch_tests(TORCH_TESTS, tmp_path)


def serve_store():
    """A TCPStore served by a process of its own (killed to make the job's store fail)."""
    port = free_port()
    code = (f"import torch.distributed as d, time; s = d.TCPStore('127.0.0.1', {port}, 1, True, "
            "wait_for_workers=False); print('up', flush=True); time.sleep(120)")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert server.stdout.readline().strip() == "up"
    return server, port


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.timeout(120)
def test_ranks_launched_apart_share_one_run_and_leave_quietly(tmp_path):
    """Two ranks started apart (no torchrun, no COLLCHECK_RUN_ID: as srun, mpirun or a shell each
    start them), rank 0 serving the job's store and taking it along when it exits. Each rank names
    the run itself; they agree on one name through the store, so the run is one folder. A rank's
    last words (its final summary, its closed log) are not sent to a server that is gone (torch
    would log a C++ backtrace for each attempt): the job's stderr holds nothing of collcheck's,
    the logs are whole, and nothing else is left in the folder."""
    port = free_port()
    env = base_env(tmp_path)
    env.pop("COLLCHECK_RUN_ID")
    jobs = [subprocess.Popen([sys.executable, program("store_on_rank0.py"), str(rank), "2", str(port)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    try:
        ended = [job.communicate(timeout=90) for job in jobs]
    finally:
        for job in jobs:
            job.kill()
    for rank, (job, (out, err)) in enumerate(zip(jobs, ended, strict=True)):
        assert job.returncode == 0 and out.strip() == f"rank {rank} done", err[-3000:]
        for noise in ("sendBytes", "Broken pipe", "live mode off", "Traceback"):
            assert noise not in err, (rank, err[-3000:])
    runs = os.listdir(tmp_path)
    assert len(runs) == 1, runs
    run_dir = str(tmp_path / runs[0])
    assert sorted(os.listdir(run_dir)) == ["rank-00000.0.msgpack", "rank-00001.0.msgpack"]  # (no empty dump file)
    run = load_run(run_dir)
    assert sorted(run.ranks) == [0, 1] and [len(run.ranks[r]) for r in (0, 1)] == [20, 20]
