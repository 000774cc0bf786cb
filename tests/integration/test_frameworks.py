"""Reports speak the framework that issued a collective: FSDP2's collectives are FSDP2's, with
FSDP's fix, never DDP's or join()'s; DTensor's name the placement change over the mesh dimension
(labels on both recording paths: test_recorder.py). Every run here is recorded with full stacks and
each label checked against the framework on its stack (framework_labels.py)."""

from __future__ import annotations

import os

import pytest
from support.cli import diff_json, diff_text
from support.framework_labels import assert_labels_speak_their_framework
from support.jobs import marker_lines, program
from support.reports import assert_rows_line_up

from collcheck.analysis.diff import analyse
from collcheck.model import load_run


def recorded(corpus, name: str, ok: bool = False) -> str:
    """The run dir of recording `name`, which ended cleanly (`ok`) or failed (the bug's hang)."""
    rec = corpus(name)
    assert (rec.rc == 0) if ok else (rec.rc not in (0, None)), rec.tail()
    return rec.run_dir


@pytest.mark.recordings("fsdp_skip")
def test_fsdp2_expert_skipped_on_one_rank_is_reported_in_fsdp_terms(corpus):
    run_dir = recorded(corpus, "fsdp_skip")  # the skipped expert hangs the job until gloo's timeout
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    # step 2's forward: 1 root-less model, 3 experts -> rank 0 gathers experts.1 where rank 1,
    # which skipped it, gathers experts.2: same shape, different module, the rank that skipped blamed
    # (step 1: 3 forward all-gathers, 3 backward all-gathers, 3 reduce-scatters; step 2: experts.0 at #9)
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == ("semantic_mismatch", "0", 10, [1])
    roles = {r: e["role"] for r, e in first["events"].items()}
    assert roles == {"0": "FSDP unshard all-gather of experts.1", "1": "FSDP unshard all-gather of experts.2"}, roles
    assert all(e["label"].startswith("FSDP2 forward: ") for e in first["events"].values()), first["events"]
    assert "experts.1" in first["message"] and "experts.2" in first["message"], first["message"]
    assert first["fix"].startswith("every rank must run the same FSDP modules"), first["fix"]
    text = diff_text(run_dir, columns=None)
    assert "FSDP2 forward" in text and "DDP" not in text and "join()" not in text, text
    assert assert_labels_speak_their_framework(load_run(run_dir)) > 20


@pytest.mark.slow
@pytest.mark.recordings("mesh_rank0_full_tensor")
def test_rank_only_full_tensor_on_a_2d_mesh_blames_that_rank_at_its_slot(corpus):
    """Rank 0 all-gathers on its tp group while ranks 1-3 wait in a world barrier: a wait-for
    cycle through rank 1, but rank 0 is the one out of step (every other rank waits on it). The
    finding names rank 0 alone, at its own slot (#3 of its tp group, by mesh dimension), and the
    table shows that slot."""
    script = program("mesh_rank0_full_tensor.py")
    marks = marker_lines(script)
    run_dir = recorded(corpus, "mesh_rank0_full_tensor")
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    assert (first["kind"], first["ranks"], first["position"]) == ("deadlock", [0], 3), first
    assert first["group_label"] == f"group {first['group']} (mesh tp [0, 1] at dp=0)", first["group_label"]
    assert first["events"]["0"]["site"]["line"] == marks["full_tensor"], first["events"]["0"]
    assert first["details"]["waited_on_by"] == {"0": [1, 2, 3]}, first["details"]
    assert first["fix"].startswith("rank 0 issued a collective the other members"), first["fix"]
    text = diff_text(run_dir, columns=200)
    assert f"{first['group_label']}: collectives around #3" in text, text
    run = load_run(run_dir)
    assert_rows_line_up(analyse(run))  # every table row: one slot on every rank
    assert assert_labels_speak_their_framework(run) > 10
    # [Shard(0), Shard(1)] on (dp, tp): the tp dimension is gathered first
    assert first["events"]["0"]["label"] == "DTensor.full_tensor(): Shard(1) -> Replicate() over tp", first["events"]["0"]


@pytest.mark.slow  # (tensor parallel's labels in the default run: test_a_correct_fsdp2_and_tensor_parallel_program_is_clean)
@pytest.mark.recordings("tp_branch")
def test_tensor_parallel_rank_only_full_tensor_names_the_placement_change(corpus):
    """parallelize_module (ColwiseParallel up, RowwiseParallel down) on a 1-D tp mesh; at step 1 rank
    0 alone all-gathers a weight for a log line: the extra collective is rank 0's, named by the
    DTensor call and the placement change over `tp`; what rank 1 issued in that slot is the next
    step's RowwiseParallel output all-reduce."""
    script = program("tp_branch.py")
    marks = marker_lines(script)
    run_dir = recorded(corpus, "tp_branch")
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    # parallelize_module: 3 scatters and 1 broadcast per rank, then one forward all-reduce per step:
    # rank 0's full_tensor() after step 1 is #6
    assert (first["kind"], first["ranks"], first["position"]) == ("extra", [0], 6), first
    mine, theirs = first["events"]["0"], first["events"]["1"]
    assert (mine["site"]["line"], mine["label"]) == (marks["full_tensor"], "DTensor.full_tensor(): Shard(0) -> Replicate() over tp"), mine
    assert theirs["label"] == "tensor parallel (a module's output): Partial(sum) -> Replicate() over tp", theirs
    assert first["group"] == "0"  # a 1-D mesh over the whole world is the default group itself (init_device_mesh)
    labels = {e.label for log in load_run(run_dir).ranks.values() for e in map(log.event, range(len(log)))}
    # each parameter parallelize_module placed, by name: Colwise shards up's weight and bias, Rowwise
    # shards down's weight and replicates its bias (a broadcast)
    assert {"parallelize_module(): up.weight, scatter over tp", "parallelize_module(): up.bias, scatter over tp",
            "parallelize_module(): down.weight, scatter over tp",
            "parallelize_module(): down.bias, broadcast over tp"} <= labels, labels
    assert assert_labels_speak_their_framework(load_run(run_dir)) > 10


@pytest.mark.slow  # its buggy twin (fsdp_skip) runs by default
@pytest.mark.recordings("fsdp_tp_ok")
def test_a_correct_fsdp2_and_tensor_parallel_program_is_clean(corpus):
    """FSDP2 over dp and tensor parallel over tp on a 2-D mesh of 4 ranks, a correct program: no
    finding, every group named by its mesh dimension, every label its framework's."""
    run_dir = recorded(corpus, "fsdp_tp_ok", ok=True)
    code, report = diff_json(run_dir)
    assert (code, report["verdict"], report["findings"]) == (0, "clean", []), report["findings"][:1]
    assert not os.path.exists(os.path.join(run_dir, "live-report.json"))  # live mode was silent too
    meshes = {g["label"].split("(")[1].split()[1] for g in report["groups"].values() if "(mesh " in g["label"]}
    assert meshes == {"dp", "tp"}, report["groups"]
    run = load_run(run_dir)
    labels = {e.label for log in run.ranks.values() for e in map(log.event, range(len(log)))}
    assert {"FSDP2 forward: FSDP unshard all-gather of blocks.0", "FSDP2 backward: FSDP gradient reduce of blocks.1",
            "DTensor.full_tensor(): Shard(0) -> Replicate() over tp",
            "tensor parallel (a module's output): Partial(sum) -> Replicate() over tp"} <= labels, labels
    # each parameter parallelize_module placed, by its name in the block: Colwise shards up's weight
    # and bias, Rowwise shards down's weight and replicates its bias (a broadcast)
    assert {"parallelize_module(): up.weight, scatter over tp", "parallelize_module(): up.bias, scatter over tp",
            "parallelize_module(): down.weight, scatter over tp",
            "parallelize_module(): down.bias, broadcast over tp"} <= labels, labels
    assert assert_labels_speak_their_framework(run) > 100


@pytest.mark.slow
@pytest.mark.recordings("fsdp_tp_rank0_full_tensor")
def test_fsdp2_and_tensor_parallel_rank_only_full_tensor_blames_that_rank(corpus):
    """The same program with the bug: only rank 0 all-gathers an FSDP2 + TP weight (its dp group
    first, its 25th collective there) while ranks 1-3 wait in the final barrier. Rank 0 alone is
    the culprit, at its own slot of its dp group, named by mesh dimension, with the placement change."""
    script = program("fsdp_tp_ok.py")
    marks = marker_lines(script)
    run_dir = recorded(corpus, "fsdp_tp_rank0_full_tensor")
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    # per step and dp group: 3 forward all-gathers, 2 prefetch all-gathers, 3 reduce-scatters; 3 steps
    assert (first["kind"], first["ranks"], first["position"]) == ("deadlock", [0], 24), first
    assert first["group_label"] == f"group {first['group']} (mesh dp [0, 2] at tp=0)", first["group_label"]
    mine = first["events"]["0"]
    assert (mine["site"]["line"], mine["label"]) == (marks["full_tensor"], "DTensor.full_tensor(): Shard(0) -> Replicate() over dp"), mine
    assert first["details"]["waited_on_by"] == {"0": [1, 2, 3]}, first["details"]
    run = load_run(run_dir)
    assert_rows_line_up(analyse(run))
    assert assert_labels_speak_their_framework(run) > 100


# -m slow: the default run reads the same labels in test_a_pipeline_stage_with_another_microbatch_count_is_the_culprit
# (Schedule1F1B, whose steps before the ragged one are this program's)
@pytest.mark.slow
@pytest.mark.parametrize("schedule", [pytest.param("1f1b", marks=pytest.mark.recordings("pipeline_ok_1f1b")),
                                      pytest.param("gpipe", marks=pytest.mark.recordings("pipeline_ok_gpipe"))])
def test_a_correct_pipeline_is_clean_and_speaks_in_stages(corpus, schedule):
    """A 2-stage pipeline (Schedule1F1B or ScheduleGPipe), 4 microbatches, 3 steps: clean; every
    send and recv is labelled with its stage, the step's microbatch count, which way it goes (the
    half of a mixed batch) and its microbatch: each way runs microbatches 0-3 in order every step,
    however the schedule interleaves them."""
    run_dir = recorded(corpus, f"pipeline_ok_{schedule}", ok=True)
    code, report = diff_json(run_dir)
    assert (code, report["verdict"], report["findings"]) == (0, "clean", []), report["findings"][:1]
    assert not os.path.exists(os.path.join(run_dir, "live-report.json"))  # live mode was silent too
    run = load_run(run_dir)
    head = {0: "pipeline stage 0 of 2, 4 microbatches: ", 1: "pipeline stage 1 of 2, 4 microbatches: "}
    ways = {0: ("forward send (activation)", "backward recv (gradient)"),
            1: ("forward recv (activation)", "backward send (gradient)")}
    for r, log in run.ranks.items():
        labels = [log.event(i).label for i in range(len(log))]
        assert all(label.startswith(head[r]) for label in labels), labels
        assert labels.count(head[r] + "set-up: shape metadata") >= 1, labels
        for way in ways[r]:
            numbers = [label.rpartition(" of microbatch ")[2] for label in labels if label.startswith(head[r] + way)]
            assert numbers == ["0", "1", "2", "3"] * 3, (way, labels)
    assert assert_labels_speak_their_framework(run) == sum(len(log) for log in run.ranks.values())


@pytest.mark.recordings("pipeline_ragged")
def test_a_pipeline_stage_with_another_microbatch_count_is_the_culprit(corpus):
    """Stage 0 splits its ragged last batch into 3 microbatches, stage 1 its padded targets into 4:
    the first unpaired message is blamed on stage 0, whose count changed (4 before), and the
    verdict says the job aborted, and how: rank 1 failed when rank 0 had finished and gone."""
    run_dir = recorded(corpus, "pipeline_ragged")
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    assert (first["kind"], first["ranks"]) == ("unmatched_p2p", [0]), first
    counts = first["details"]["microbatches"]
    assert counts == {"0": {"stage": "stage 0", "last": 3, "before": 4},
                      "1": {"stage": "stage 1", "last": 4, "before": None}}, counts
    assert "stage 0 (rank 0) 3 (4 before), stage 1 (rank 1) 4" in first["message"], first["message"]
    assert first["fix"].startswith("every stage must run the same number of microbatches"), first["fix"]
    # the message stage 1 waits for: its 4th microbatch's activation, which stage 0 never computed
    assert first["events"]["1"]["label"].endswith("forward recv (activation) of microbatch 3"), first["events"]
    assert report["verdict"] == "aborted" and report["aborted"].startswith("rank 1 failed at once"), report["aborted"]
    # rank 1 waits in the recv of its last batch; the send beside it was received by rank 0
    assert [e["op"] for e in report["ranks"]["1"]["blocked_in"]] == ["recv_"], report["ranks"]["1"]
    run = load_run(run_dir)
    assert assert_labels_speak_their_framework(run) > 50
    # the steps before: each send and recv labelled with its stage, the step's microbatch count, its
    # way and its microbatch: each way runs microbatches 0-3 in order in each of the 3 steps, however
    # 1F1B interleaves them; stage 0's last step, 3 microbatches
    ways = {0: ("forward send (activation)", "backward recv (gradient)"),
            1: ("forward recv (activation)", "backward send (gradient)")}
    for r, log in run.ranks.items():
        labels = [log.event(i).label for i in range(len(log))]
        assert all(label.startswith(f"pipeline stage {r} of 2, ") for label in labels), labels
        assert f"pipeline stage {r} of 2, 4 microbatches: set-up: shape metadata" in labels, labels
        for way in ways[r]:
            numbers = [label.rpartition(" of microbatch ")[2] for label in labels
                       if label.startswith(f"pipeline stage {r} of 2, 4 microbatches: {way}")]
            assert numbers[:12] == ["0", "1", "2", "3"] * 3, (way, labels)
    last = [e.label for e in map(run.ranks[0].event, range(len(run.ranks[0])))
            if e.label.startswith("pipeline stage 0 of 2, 3 microbatches: forward send")]
    assert [label.rpartition(" ")[2] for label in last] == ["0", "1", "2"], last


@pytest.mark.slow
@pytest.mark.recordings("dcp_rank0")
def test_a_checkpoint_saved_on_one_rank_blames_that_rank(corpus):
    """torch.distributed.checkpoint.save called on rank 0 only: its planning collective meets rank
    1's next all-reduce. With two ranks there is no majority: the program's source says rank 0
    entered `if rank == 0:` around the save, so rank 0 issued one more call (not the user's
    all-reduce, though DCP's call is torch's own); the fix is DCP's."""
    marks = marker_lines(program("dcp_rank0.py"))
    run_dir = recorded(corpus, "dcp_rank0")
    code, report = diff_json(run_dir)
    first = report["findings"][0]
    assert (code, first["kind"], first["ranks"], first["position"]) == (1, "extra", [0], 4), first
    assert first["details"]["decided_by"] == "source", first["details"]
    mine = first["events"]["0"]
    assert (mine["site"]["line"], mine["label"], mine["role"]) == (
        marks["save"], "checkpoint save: checkpoint planning", "checkpoint planning"), mine
    assert first["fix"].startswith("call torch.distributed.checkpoint save/load on every rank"), first["fix"]
    assert assert_labels_speak_their_framework(load_run(run_dir)) > 0


@pytest.mark.slow
@pytest.mark.recordings("dcp_all")
def test_a_checkpoint_saved_on_every_rank_is_clean(corpus):
    assert diff_json(recorded(corpus, "dcp_all", ok=True))[1]["verdict"] == "clean"


def test_every_table_entry_names_a_function_of_this_torch():
    """Each (file, function) a framework table keys a label by is defined in the installed torch's
    source: a renamed function in a new torch release fails here, not silently in a user's report."""
    import ast

    import torch

    from collcheck.knowledge import torch_internals as frameworks

    root = os.path.dirname(torch.__file__)
    defined: dict = {}
    missing = []
    for table in frameworks.TABLES:
        for kind in ("ROLES", "PHASES", "ENTRY_POINTS", "DETAILS", "ENTRY_DETAILS", "FRAME_DETAILS"):
            for file, func in getattr(table, kind, {}):
                if file not in defined:
                    path = os.path.join(root, file)
                    tree = ast.parse(open(path).read()) if os.path.exists(path) else ast.Module(body=[], type_ignores=[])
                    defined[file] = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
                if func not in defined[file]:
                    missing.append(f"{table.__name__}.{kind}: {file}:{func}")
    assert not missing, missing
    assert len(defined) > 20
