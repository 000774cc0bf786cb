"""Two camps of ranks part at one slot and the trace alone reads the same whichever took a
branch: the program's source says who. Each bug program (tests/integration/programs/blame_*.py)
puts the rank-dependent condition where people put it (a helper two calls deep, a framework's
hook, `@rank_zero_only`, a per-rank `break` or `return`, an else-branch, `LOCAL_RANK`, a flag
set from the rank, a method, a `with` block, a `for` loop, another file); the first finding
blames the rank that took it, at its slot, and quotes the condition and its line. Point-to-point:
a receive never matched blames the peer that should have sent. Every expectation comes from
the program (its docstring), not from a report; each correct twin is clean (a receive from any
source included)."""

from __future__ import annotations

import os

import pytest
from support.cli import diff_json, diff_text
from support.corpus import BLAME_PROGRAMS
from support.jobs import marker_lines, program

# The first finding, from the program: (kind, group, slot, culprit ranks, {rank: the marker of
# its innermost line of the program at that slot}, the marker of the rank-dependent condition
# or None). Slots count the group's collectives from 0; a point-to-point slot is the message's
# number on its channel (src -> dst).
EXPECTED = {
    # rank 1 (the last rank) reduces the statistics two calls below the loop, rank 0 goes on to
    # step 2's gradient all-reduce
    "blame_helper": ("extra", "0", 4, [1], {0: "grads", 1: "stats"}, "cond"),
    # LOCAL_RANK 0's else-branch skips the barrier ranks 1-3 wait in; it broadcasts the weight
    "blame_env_download": ("missing", "0", 1, [0], {0: "bcast", 1: "wait", 2: "wait", 3: "wait"}, "cond"),
    # the logger flag (rank 1), inside `with torch.no_grad():` in the loop: an extra all_reduce
    "blame_ddp_logger": ("extra", "0", 7, [1], {0: "backward", 1: "val_reduce"}, "cond"),
    # rank 1's own loss under the target: it breaks out and skips step 2's gradient all-reduce
    "blame_ddp_converged": ("missing", "0", 7, [1], {0: "backward", 1: "summary"}, "cond"),
    # a method of the user's Trainer: rank 0 exports the full state dict (all-gathers)
    "blame_fsdp2_export": ("extra", "0", 12, [0], {0: "export", 1: "forward"}, "cond"),
    # the mesh's last rank skips the bias' full_tensor() in a `for` loop
    "blame_dtensor_snapshot": ("missing", "0", 4, [3], {0: "full", 1: "full", 2: "full", 3: "barrier"}, "cond"),
    # a `@rank_zero_only` hook calls trainer.save_checkpoint (a barrier)
    "blame_lightning_ckpt": ("extra", "0", 22, [0], {0: "save", 1: "fit"}, "cond"),
    # on_validation_epoch_end: self.all_gather inside `if self.trainer.is_global_zero:`
    "blame_lightning_val": ("extra", "0", 25, [0], {0: "gather", 1: "fit"}, "cond"),
    # `if accelerator.is_local_main_process:` here, the gather in blame_accelerate_report.py
    "blame_accelerate_summary": ("extra", "0", 8, [0], {0: "report_gather", 1: "wait"}, "cond"),
    # rank 1 has no validation file: evaluate() returns before accelerator.reduce
    "blame_accelerate_empty_shard": ("missing", "0", 7, [1], {0: "reduce", 1: "backward"}, "cond"),
    # a Trainer callback's on_evaluate: a barrier inside `if state.is_world_process_zero:`
    "blame_trainer_evaluate": ("extra", "0", 8, [0], {0: "barrier", 1: "train"}, "cond"),
    # rank 1 dropped a send: rank 0's 4th receive from it (message 3 of 1 -> 0) is never sent
    "blame_p2p_lost_send": ("unmatched_p2p", "0", 3, [1], {0: "recv"}, None),
    # rank 3 has no right neighbour: message 0 of 3 -> 0 and of 0 -> 3 are rank 3's to post
    "blame_p2p_halo": ("unmatched_p2p", "0", 0, [3], {0: "batch"}, None),
    # rank 2 sent 2 of the 3 results it announced: the collector's receive from any source waits
    # for rank 2's message 2
    # the receive no send reached blames the ranks that send to it (one of them owes the message),
    # never the receiver; the receives the sends did reach are paired with them
    "blame_p2p_any_source": ("unmatched_p2p", "0", 0, [1, 2], {0: "recv_any"}, None),
}
# modules next to a program that hold some of its markers
COMPANIONS = {"blame_accelerate_summary": ("blame_accelerate_report.py",)}
# the default run records two cheap bugs; the rest: -m slow
DEFAULT_RUN = {"blame_helper", "blame_p2p_lost_send"}
COLUMNS = 120  # a terminal's width


def cases(names):
    return [pytest.param(n, marks=[pytest.mark.recordings(n)] + ([] if n in DEFAULT_RUN else [pytest.mark.slow]), id=n)
            for n in names]


def markers(name: str) -> dict[str, tuple[str, int]]:
    """Marker -> (file name, line) over the program and its companion modules."""
    found = {}
    for file in (f"{name}.py", *COMPANIONS.get(name, ())):
        for marker, line in marker_lines(program(file)).items():
            assert marker not in found, f"marker {marker} in two files of {name}"
            found[marker] = (file, line)
    return found


def source_line(file: str, line: int) -> str:
    """The marked line as the user reads it, without its marker comment."""
    with open(program(file)) as f:
        text = f.read().splitlines()[line - 1]
    return text.split("# @", 1)[0].strip()


def recorded(corpus, name: str, ok: bool) -> str:
    rec = corpus(name)
    assert (rec.rc == 0) if ok else (rec.rc not in (0, None)), rec.tail()
    return rec.run_dir


def test_every_program_is_declared_with_its_twin():
    assert {f"blame_{case}" for case in BLAME_PROGRAMS} == set(EXPECTED)
    for name, (_, _, _, _, frames, cond) in EXPECTED.items():
        marks = markers(name)
        assert set(frames.values()) | {cond} - {None} <= set(marks), name


@pytest.mark.parametrize("name", cases(EXPECTED))
def test_the_culprit_is_the_rank_that_took_the_branch(corpus, name):
    """Kind, group, slot and culprit as the program has them; each involved rank's line of the
    program in the text report; the condition's file, line and text in the finding, decided by
    the source."""
    kind, group, slot, culprits, frames, cond = EXPECTED[name]
    run_dir = recorded(corpus, name, ok=False)
    code, report = diff_json(run_dir)
    assert code == 1, report
    first = report["findings"][0]
    got = {k: first[k] for k in ("kind", "group", "position", "ranks", "message")}
    assert (first["kind"], first["group"], first["position"], first["ranks"]) == (kind, group, slot, culprits), got
    text = diff_text(run_dir, columns=COLUMNS).split("finding 2:", 1)[0]
    marks = markers(name)
    for rank, marker in frames.items():
        where = "{}:{}".format(*marks[marker])
        assert where in text, f"rank {rank}'s own line {where} ({marker}) is not in the report:\n{text}"
    if cond is None:
        return
    file, line = marks[cond]
    details = first["details"]
    condition = details.get("condition") or {}
    assert (os.path.basename(condition.get("file", "")), condition.get("line")) == (file, line), (details, got)
    quoted = condition.get("text", "")
    assert quoted and quoted in first["message"], (quoted, first["message"])
    src, quote = source_line(file, line), quoted.removesuffix("...")  # (a long line is cut; a comment kept)
    assert quote.startswith(src) or src.startswith(quote), (src, quoted)
    # two camps and no majority: the source decided; with a majority, it named the culprits and the
    # source said what they did
    majority = 2 * len(first["ranks"]) < len(report["ranks"])
    assert details.get("decided_by") == ("majority" if majority else "source"), details


@pytest.mark.parametrize("name", cases(f"{name}_ok" for name in EXPECTED))
def test_the_correct_twin_is_clean(corpus, name):
    code, report = diff_json(recorded(corpus, name, ok=True))
    assert (code, report["verdict"], report["findings"]) == (0, "clean", []), report["findings"][:1]
