"""Bugs users write in framework code (Lightning, accelerate, a Hugging Face Trainer, DeepSpeed)
and two torch patterns (an all-reduce without `group=` on a 2-D mesh, an FSDP2 rank that skips
backward): the first finding blames the rank that left the common path, at its slot, shows each
involved rank's own line whatever the frameworks' frames around it, and speaks the framework's
words. Every expectation comes from what the program does (its docstring and comments), not from
what a report once said; each correct program is clean."""

from __future__ import annotations

import importlib.util
import os

import pytest
from support.cli import diff_json, diff_text
from support.corpus import FRAMEWORK_CASES
from support.jobs import marker_lines, program

# What the report must say for each bug, in the framework's own words: each entry is a tuple of
# alternatives, one of which must appear in the first finding's part of the text report.
FRAMEWORK_WORDS = {
    # (the metric's name is not on any stack: Lightning reduces it at the epoch's end, from its own frames)
    "fw_lightning_metric_rank0": (("self.log(..., sync_dist=True)",), ("SIGTERM",)),
    "fw_lightning_uneven": (("SIGTERM",), ("self.log(..., sync_dist=True)",)),
    "fw_accelerate_main_only_gather": (("gather_for_metrics",), ("wait_for_everyone",)),
    "fw_accelerate_uneven": (("gather_for_metrics",), ("accelerator.backward",)),
    "fw_transformers_early_stop": (("should_training_stop", "EarlyStopping"),
                                   ("store_flos", "floating-point operations", "floating point operations")),
    "fw_deepspeed_save_rank0": (("save_checkpoint",),),
    "tp_world_allreduce": (("group=",),),
    "fsdp2_skip_backward": (("skipped the FSDP2 backward of step 2",),),
}

# The first finding, from the program: (kind, group, slot, culprit ranks, {rank: the marker of
# its innermost user frame at that slot}). Slots count the group's collectives from 0.
EXPECTED = {
    # Lightning set-up: 14 collectives (log-dir broadcast 2, barriers 2, DDP's 3, barriers 3, the
    # dataloader length reductions 4); a step: the SIGTERM-flag broadcast and DDP's gradient
    # all-reduce (step 2 also DDP's 2 bucket-rebuild broadcasts): 3 steps end at #21; the epoch's end
    # reduces train_loss (barrier + all-reduce, twice: #22-#25); then rank 0 alone reduces
    # epoch_time_s (#26) while rank 1 starts epoch 2. self.log only stores the value: the
    # reduction runs inside trainer.fit, the user's innermost frame on both ranks.
    "fw_lightning_metric_rank0": ("extra", "0", 26, [0], {0: "fit", 1: "fit"}),
    # rank 0's 4th step (#22, its SIGTERM-flag broadcast) against rank 1's end-of-epoch reduction
    "fw_lightning_uneven": ("extra", "0", 22, [0], {0: "fit", 1: "fit"}),
    # accelerate set-up: DDP's 3; 3 steps: 4 gradient all-reduces and 2 bucket-rebuild broadcasts
    # (#3-#7); rank 0 gathers at #8 where rank 1 waits for everyone
    "fw_accelerate_main_only_gather": ("extra", "0", 8, [0], {0: "main_gather", 1: "wait"}),
    # rank 0's 4th backward (#8) against rank 1's first evaluation gather
    "fw_accelerate_uneven": ("extra", "0", 8, [0], {0: "backward", 1: "gather"}),
    # Trainer set-up: DDP's 3; a step: the label count all-gather, DDP's gradient all-reduce and its
    # unused-parameter map all-reduce: 2 steps end at #8; rank 1 stopped: it skipped steps 3-6
    "fw_transformers_early_stop": ("missing", "0", 9, [1], {0: "train", 1: "train"}),
    # the engine's collectives run on DeepSpeed's data-parallel group; save_checkpoint's barrier is
    # the world group's first collective
    "fw_deepspeed_save_rank0": ("extra", "0", 0, [0], {0: "save_rank0", 1: "backward"}),
    # WORLD: the set-up barrier (#0), then the leaders' all-reduce (#1); ranks 0 and 2 are the tp
    # leaders (exactly the dp group at tp=0)
    "tp_world_allreduce": ("extra", "0", 1, [0, 2],
                           {0: "world_allreduce", 1: "tp_allreduce", 2: "world_allreduce", 3: "tp_allreduce"}),
    # a step: 2 forward all-gathers, a backward all-gather and a prefetch all-gather, 2
    # reduce-scatters: step 2's backward starts at #14, which rank 1 skipped
    "fsdp2_skip_backward": ("missing", "0", 14, [1], {0: "backward", 1: "forward"}),
}
# every framework's recording runs with -m slow (each imports its framework: seconds per rank); the
# rules they exercise are shown in-process by default: tests/unit/analysis/test_blame_properties.py
DEFAULT_RUN: set = set()


def _installed(module: str) -> bool:
    """Found on the path (not imported: DeepSpeed's import alone takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


HAVE_DEEPSPEED = _installed("deepspeed")
DEEPSPEED_SKIP = "DeepSpeed is not installed (not in the test extra): pip install --no-build-isolation deepspeed"
COLUMNS = 120  # a terminal's width: the user's lines show whatever the width


def script_of(name: str) -> str:
    """fw_<framework>_<case> runs fw_<framework>.py; the torch programs are named as they run."""
    return program(f"fw_{name.split('_')[1]}.py" if name.startswith("fw_") else f"{name}.py")


def cases(names, default=()):
    """pytest parameters: each reads its recording; DeepSpeed's are marked and skipped without it
    (and then not recorded)."""
    out = []
    for name in names:
        marks = [] if name in default else [pytest.mark.slow]
        if name.startswith("fw_deepspeed"):
            marks += [pytest.mark.deepspeed, pytest.mark.skipif(not HAVE_DEEPSPEED, reason=DEEPSPEED_SKIP)]
        if HAVE_DEEPSPEED or not name.startswith("fw_deepspeed"):
            marks.append(pytest.mark.recordings(name))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def recorded(corpus, name: str, ok: bool) -> str:
    """The run dir of `name`, which ended cleanly (`ok`) or failed (the bug's hang or abort)."""
    rec = corpus(name)
    if name.startswith("fw_deepspeed") and "No module named 'deepspeed'" in rec.output:
        pytest.skip(DEEPSPEED_SKIP)
    assert (rec.rc == 0) if ok else (rec.rc not in (0, None)), rec.tail()
    return rec.run_dir


def first_finding_text(run_dir: str) -> str:
    """The text report up to its second finding (the first finding, its table, its call chains)."""
    text = diff_text(run_dir, columns=COLUMNS)
    return text.split("finding 2:", 1)[0]


@pytest.mark.parametrize("name", cases(EXPECTED, DEFAULT_RUN))
def test_the_first_finding_blames_the_rank_that_left_the_common_path(corpus, name):
    """Kind, group, slot and culprit as the program has them; in the text report (a terminal's
    width), each involved rank's innermost line of the program and the framework's words."""
    kind, group, slot, culprits, frames = EXPECTED[name]
    run_dir = recorded(corpus, name, ok=False)
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == (kind, group, slot, culprits), (
        {k: first[k] for k in ("kind", "group", "position", "ranks", "message")})
    text = first_finding_text(run_dir)
    script = script_of(name)
    marks = marker_lines(script)
    for rank, marker in frames.items():
        where = f"{os.path.basename(script)}:{marks[marker]}"
        assert where in text, f"rank {rank}'s own line {where} ({marker}) is not in the report:\n{text}"
    flat = " ".join(text.replace("│", " ").split())  # (a phrase may wrap in the panel)
    for alternatives in FRAMEWORK_WORDS[name]:
        assert any(word in flat for word in alternatives), f"none of {alternatives} in the report:\n{text}"


@pytest.mark.slow  # (the rule in-process: unit/analysis/test_blame_properties.py)
@pytest.mark.recordings("tp_world_allreduce")
def test_an_all_reduce_without_group_names_the_world_call_and_its_callers(corpus):
    """The tp leaders' all-reduce on WORLD is the culprit, not the tp peers that wait for them in
    their group: its callers (ranks 0 and 2) are exactly the members of another group, so the
    finding asks whether `group=` is missing."""
    marks = marker_lines(program("tp_world_allreduce.py"))
    _, report = diff_json(recorded(corpus, "tp_world_allreduce", ok=False))
    first = report["findings"][0]
    events = first["events"]
    assert {r: (e["api"], e["group"], e["site"]["line"]) for r, e in events.items() if r in ("0", "2")} == {
        "0": ("all_reduce", "0", marks["world_allreduce"]), "2": ("all_reduce", "0", marks["world_allreduce"])}, events
    assert "group=" in first["message"] + first["fix"], (first["message"], first["fix"])


@pytest.mark.slow
@pytest.mark.recordings("fsdp2_skip_backward")
def test_an_fsdp2_rank_that_skips_backward_is_named_as_a_skipped_backward(corpus):
    """Rank 1 skipped step 2's backward after a non-finite loss: its next forward's all-gathers
    pair, same size, with rank 0's backward ones. That is one rank's skipped backward, not the
    same collectives in another order."""
    _, report = diff_json(recorded(corpus, "fsdp2_skip_backward", ok=False))
    first = report["findings"][0]
    assert first["kind"] == "missing" and first["ranks"] == [1], first
    assert "rank 1" in first["message"] and "backward" in first["message"], first["message"]


@pytest.mark.parametrize("name", cases([f"fw_{framework}_ok" for framework in FRAMEWORK_CASES]))
def test_a_correct_program_on_each_framework_is_clean(corpus, name):
    code, report = diff_json(recorded(corpus, name, ok=True))
    assert (code, report["verdict"], report["findings"]) == (0, "clean", []), report["findings"][:1]
