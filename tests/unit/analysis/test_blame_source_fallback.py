"""The program's source is used only when it is the file the run recorded (analysis/source.py):
removed, edited (another size; the same size with other bytes and a new mtime) or elsewhere,
`collcheck diff` still blames (exit 1, no traceback), from the trace, and says why the source was
not used; `--source-root` on a moved copy that matches uses it again; `--no-source` never reads it.

Two-rank loops (support/rank_programs.py) where the trace alone reads the same whichever rank
took the branch: a changed call (the aligner's tie), an extra call gloo paired silently with the
others' next one (the chains' finding) and an early exit. Each rank's log ends killed (the L
records hold the file's size and mtime) or through the timeout's exception (also its hash, as
the recorder writes it at exit)."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, replace

import pytest
from support.cli import diff_text, run_cli
from support.rank_programs import Program, save, write_run

PROGRAMS = {
    # rank 1 all-reduces 3 floats under `if rank == 1 and step == 1:` where rank 0 goes on to 8
    "changed_call": Program(2, 1, 2, [([], [("all_reduce", 8)]), ([("broadcast", 4)], []), ([("all_reduce", 16)], [])],
                            at=2, pos=1, form="rank", steps=("and", 1), extras=[("all_reduce", 3, False)], loop=3),
    # rank 0's `report()` under `if is_main:` all-reduces 16 floats, as the next common call does
    "paired_silently": Program(2, 0, 1, [([("all_reduce", 8)], [("broadcast", 4)]), ([("all_reduce", 16)], [])],
                               at=1, pos=0, form="is_main", steps=("every", 0), extras=[("all_reduce", 16, True)],
                               loop=3),
    # rank 1 returns early from a helper from step 2 on (`if step >= 2 and rank != 0: return`)
    "early_exit": Program(2, 1, 2, [([], [("barrier", 0)]), ([("all_reduce", 8)], []), ([("all_reduce", 4)], [])],
                          at=1, pos=1, form="not_zero", steps=("and_first", 2), loop=4, final=("all_reduce", 2)),
}
UNUSED = "source not available here: train.py ({why}); blame from the trace"


@dataclass
class Recorded:
    run: str  # the logs' folder
    path: str  # the program's file, as recorded
    program: Program
    hashed: bool  # the ranks exited (through the timeout's exception): the L records hold the file's hash


@pytest.fixture(params=[(name, ending) for name in PROGRAMS for ending in ("killed", "raised")],
                ids=lambda p: "-".join(p))
def recorded(request, tmp_path) -> Recorded:
    """The logs in tmp_path/run, the program in tmp_path/job."""
    name, ending = request.param
    program = replace(PROGRAMS[name])
    src = tmp_path / "job"
    src.mkdir()
    path = save(str(src), program)
    write_run(str(tmp_path / "run"), path, program.world, ending)
    return Recorded(str(tmp_path / "run"), path, program, ending == "raised")


def same_size_edit(path: str, mtime_shift_ns: int) -> None:
    """Other bytes of the same length in the file's docstring; its mtime moved by the shift."""
    before = os.stat(path)
    with open(path) as f:
        text = f.read()
    edited = text.replace("A generated training loop", "A GENERATED TRAINING LOOP")
    assert edited != text and len(edited) == len(text)
    with open(path, "w") as f:
        f.write(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + mtime_shift_ns))
    assert os.stat(path).st_size == before.st_size


def diff(run_dir: str, *options: str) -> tuple[dict, dict]:
    """`collcheck diff RUN --format json [OPTIONS]`: (the report, its first finding); a finding
    exits 1, never 2 (bad input) or 3 (a bug), and nothing is printed to stderr."""
    res = run_cli("diff", run_dir, "--format", "json", *options)
    assert (res.code, res.err) == (1, ""), (res.code, res.err[-2000:])
    report = json.loads(res.out)
    return report, report["findings"][0]


def from_source(report: dict, first: dict, program: Program, path: str) -> None:
    assert first["ranks"] == [program.culprit], first["message"]
    assert first["details"].get("decided_by") == "source", first["details"]
    assert first["details"]["condition"] == {"file": path, "line": program.cond_line, "text": program.cond_text}
    assert not any("source not available" in w for w in report["warnings"]), report["warnings"]


def from_trace(report: dict, first: dict, why: str | None) -> None:
    assert first["details"].get("decided_by") != "source", first["details"]
    assert "condition" not in first["details"], first["details"]
    notes = [w for w in report["warnings"] if "source" in w]
    assert notes == ([UNUSED.format(why=why)] if why else []), report["warnings"]


def test_the_recorded_file_decides(recorded):
    from_source(*diff(recorded.run), recorded.program, recorded.path)


def test_a_removed_file_leaves_the_blame_to_the_trace(recorded):
    os.remove(recorded.path)
    from_trace(*diff(recorded.run), "not found")
    assert UNUSED.format(why="not found") in diff_text(recorded.run)


def test_a_file_edited_since_the_run_is_not_read(recorded):
    """Another size: a line added at the end."""
    with open(recorded.path, "a") as f:
        f.write("# edited after the run\n")
    from_trace(*diff(recorded.run), "changed since the run")


def test_a_file_of_the_same_size_with_other_bytes_and_a_new_mtime_is_not_read(recorded):
    same_size_edit(recorded.path, 5_000_000_000)
    from_trace(*diff(recorded.run), "changed since the run")


def test_other_bytes_of_the_same_size_and_mtime_are_caught_by_the_hash(recorded):
    """The same size and mtime, other bytes: ranks that exited hashed the file (the recorder's L
    record at exit), so the edit is caught; a killed job left only the size and mtime, which
    match: the file is read as the run's."""
    same_size_edit(recorded.path, 0)
    if recorded.hashed:
        from_trace(*diff(recorded.run), "changed since the run")
    else:
        from_source(*diff(recorded.run), recorded.program, recorded.path)


def test_a_moved_copy_is_read_through_source_root(recorded, tmp_path):
    """The job's folder copied elsewhere (new mtimes) and the original gone: --source-root finds
    the copy by the recorded path's tail, checks it (its hash, else its size) and reads it; the
    finding quotes the condition with the file as recorded. A copy edited since is not read."""
    checkout = tmp_path / "checkout"
    shutil.copytree(os.path.dirname(recorded.path), checkout / "job", copy_function=shutil.copy)
    os.remove(recorded.path)
    from_trace(*diff(recorded.run), "not found")
    from_source(*diff(recorded.run, "--source-root", str(checkout)), recorded.program, recorded.path)
    with open(checkout / "job" / "train.py", "a") as f:
        f.write("# edited after the run\n")
    from_trace(*diff(recorded.run, "--source-root", str(checkout)), "changed since the run")


def test_no_source_blames_from_the_trace_alone(recorded):
    """--no-source: the file is there and matches, and is never read (no note either)."""
    from_trace(*diff(recorded.run, "--no-source"), None)
