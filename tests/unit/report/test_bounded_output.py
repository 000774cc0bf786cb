"""What a human report prints of one value is bounded, whatever the logs hold: a group record that
lists 2^20 members (a 10 MB log; printed whole through the console's wrapper, `collcheck show`
gave no answer in a minute), a run of more groups or warnings than a screen holds."""

from __future__ import annotations

import json
import os

from support import runs
from support.cli import run_cli
from support.runs import Call

from collcheck.logfile import format as lf
from collcheck.logfile.writer import LogWriter, open_exclusive
from collcheck.model import load_run
from collcheck.report import WARNINGS_SHOWN
from collcheck.synth import write_groups_run

WORLD = 1 << 20


def _log_of_a_million_members(directory: str) -> str:
    """Rank 0 of a world of 2^20, whose default group (a DeviceMesh's) lists every rank."""
    os.makedirs(directory)
    fd, path = open_exclusive(directory, "rank-00000.0")
    w = LogWriter(fd, path)
    members = list(range(WORLD))
    with w.lock:
        w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": WORLD, "run": "unit",
                 "launch": "unit", "restart": 0, "host": "unit", "pid": 1, "backend": "cpu:gloo",
                 "wall_ns": 1_700_000_000_000_000_000, "mono_ns": 0})
        w.queue({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "d": "mesh_dp", "r": members})
        w.write({"k": lf.GROUP, "op": "init", "ts": 0, "gid": 0, "g": "0", "r": members, "d": "mesh_dp"})
        w.write({"k": lf.COLL, "o": w.string_id("allreduce_"), "g": 0, "ts": 100, "j": 0, "r": 0,
                 "s": w.site_id("/job/train.py", 10, "train_step"), "t": w.tspec_id((("float32", (4,)),))}, 0)
        w.queue({"k": lf.DONE, "i": 0, "r": 105, "c": 140})
        w.write({"k": lf.TRAILER, "ts": 1000})
    w.close()
    return path


def test_a_group_of_a_million_ranks_is_one_short_line(tmp_path):
    log = _log_of_a_million_members(str(tmp_path / "run"))
    shown = run_cli("show", log, columns=160)
    assert shown.code == 0, shown.err
    assert "group init: 0 ranks=1,048,576 ranks: 0-1048575" in shown.out, shown.out
    assert len(shown.out) < 4000, len(shown.out)
    stats = run_cli("stats", log, columns=160)
    assert stats.code == 0, stats.err
    assert "mesh dp 1,048,576 ranks: 0-1048575" in stats.out.replace("\n", " ").replace("│", " ").replace("  ", " ")
    assert len(stats.out) < 8000, len(stats.out)


def test_stats_shows_the_top_groups_and_counts_the_others(tmp_path):
    groups = {"0": (0, 1), **{str(g): (0, 1) for g in range(1, 31)}}
    runs.write(str(tmp_path), groups, {r: [Call(group=g, line=10 + int(g)) for g in groups] for r in (0, 1)})
    res = run_cli("stats", str(tmp_path), "--top", "5", columns=200)
    assert res.code == 0, res.err
    assert "... 26 more groups (--top, or --format json for all)" in res.out, res.out
    assert run_cli("stats", str(tmp_path), "--format", "json").out.count('"members"') == 31


def test_the_text_report_lists_the_first_warnings_and_counts_the_others(tmp_path):
    """A log that lost collectives of 20 of its groups: a warning per group and rank, forty listed."""
    write_groups_run(str(tmp_path), 60)
    log = load_run(str(tmp_path), workers=1).ranks[0]
    data = bytearray(open(log.path, "rb").read())
    for i in range(1, len(log), 3):
        data[log.off[i] + 12] ^= 0xFF  # (a byte of the collective's frame: its CRC fails)
    with open(log.path, "wb") as f:
        f.write(bytes(data))
    report = run_cli("diff", str(tmp_path), "--format", "json")
    warnings = json.loads(report.out)["warnings"]
    assert len(warnings) > WARNINGS_SHOWN, warnings
    res = run_cli("diff", str(tmp_path), columns=250)
    listed = [line for line in res.out.splitlines() if line.startswith("warning: ")]
    assert [w.removeprefix("warning: ") for w in listed] == warnings[:WARNINGS_SHOWN], res.out
    assert f"... {len(warnings) - WARNINGS_SHOWN} more warnings (--format json for all)" in res.out, res.out
