"""Work linear in the number of groups (seed: a 2-rank run of 20,000 groups took 34 s in `collcheck
diff`): every group's members were looked up by a walk over every rank's group list, per group and
per collective. Counted, not timed: the lines of collcheck's code that loading, analysing and
showing a run executes (diff's reports, stats, the TUI's first screen and its group list) for N
and 2N groups; a spot that walks every group per group makes the count grow with the square.
The same with a damaged log, whose losses are placed group by group. (The wall times:
benchmarks/bench_many_groups.py.)"""

from __future__ import annotations

import io
import os
import sys

import pytest

import collcheck
from collcheck.analysis.diff import analyse
from collcheck.logfile import scanner
from collcheck.logfile.decode import LogFile
from collcheck.model import group_label, load_run
from collcheck.report import stats as stats_report
from collcheck.report.json_report import render as render_json
from collcheck.report.text import render as render_text
from collcheck.stats.summary import compute
from collcheck.synth import write_groups_run
from collcheck.tui import navigation
from collcheck.tui.grid import Grid
from collcheck.tui.widgets import panes

PACKAGE = os.path.dirname(collcheck.__file__)
GROUPS = 150


def _everything(directory: str) -> None:
    """What diff, stats and the TUI's first screen do with a run."""
    run = load_run(directory, workers=1)
    report = analyse(run)
    render_text(report, io.StringIO())
    render_json(report, io.StringIO())
    st = compute(run)
    for fmt in ("text", "json"):
        (stats_report.render_json if fmt == "json" else stats_report.render_text)(st, io.StringIO())
    Grid(report, None)
    panes.overview(report)
    navigation.group_choices(report, navigation.MERGED)
    for name in run.group_names():
        group_label(run, name)


def _lines(directory: str) -> int:
    """Lines of collcheck's own code executed by `_everything` (sys.settrace: other code is not traced)."""
    return _lines_of(lambda: _everything(directory))


def _damage(directory: str) -> None:
    """Rank 0's log loses every third collective of its second half (a byte flipped in each's frame)."""
    run = load_run(directory, workers=1)
    log = run.ranks[0]
    data = bytearray(open(log.path, "rb").read())
    for i in range(len(log) // 3, len(log), 3):
        data[log.off[i] + 12] ^= 0xFF
    with open(log.path, "wb") as f:
        f.write(bytes(data))


@pytest.mark.parametrize("damaged", [False, True], ids=["clean", "damaged"])
def test_the_work_grows_linearly_with_the_groups(tmp_path, damaged):
    counts = []
    for n in (GROUPS, 2 * GROUPS):
        d = str(tmp_path / str(n))
        os.makedirs(d)
        write_groups_run(d, n)
        if damaged:
            _damage(d)
            assert load_run(d, workers=1).ranks[0].losses
        counts.append(_lines(d))
    # linear: twice the groups, at most twice the lines (a fixed part makes it less); the quadratic
    # spots this replaced made it 2.7 times
    assert counts[1] <= 2.1 * counts[0], counts


def test_a_log_of_more_groups_than_16_bits_reads_them_all(tmp_path, monkeypatch):
    """Group slots are kept in 16 bits per collective until a log has more groups: the column
    widens (here from the fifth group on), every collective is read."""
    monkeypatch.setattr(scanner, "NARROW_SLOTS", 4)
    write_groups_run(str(tmp_path), 10, calls=2)
    run = load_run(str(tmp_path), workers=1)
    log = run.ranks[0]
    assert log.gid.typecode == "I" and len(log) == 20 and not log.lost
    assert [log.groups[g].name for g in log.gid[-4:]] == ["9", "9", "10", "10"]
    assert analyse(run).verdict == "clean"


def test_the_groups_beyond_a_logs_limit_are_damage(tmp_path, monkeypatch):
    monkeypatch.setattr(scanner, "MAX_GROUPS", 6)
    write_groups_run(str(tmp_path), 10)
    run = load_run(str(tmp_path), workers=1)
    assert len(run.ranks[0]) == 5 and len(run.ranks[0].lost) == 5  # the world group and 5 of the 10
    assert any("5 collectives unreadable" in w for w in run.warnings), run.warnings


def _lines_of(work) -> int:
    """Lines of collcheck's own code `work()` executes."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code.co_filename.startswith(PACKAGE) else None)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def test_stats_and_the_first_screen_do_a_few_lines_per_group_and_read_no_log_again(tmp_path, monkeypatch):
    """`collcheck stats` (its run loaded with the collectives' times) and the TUI's first screen
    (the grid, the overview and the cursor's event decoded for the status line) do a small constant
    of work per group: stats once decoded every collective again (about 1,100 lines of collcheck a
    group of this 2-rank run), the grid made numpy arrays per group and rank (about 80), and the
    cursor's event read its whole log again for the tables its ids name. Counted for N and 2N
    groups; neither reads a log through again."""
    decoded = []  # what read a log through again
    events, tables = LogFile.events, LogFile.tables.fget
    monkeypatch.setattr(LogFile, "events", lambda self, eids: decoded.append("events") or events(self, eids))
    monkeypatch.setattr(LogFile, "tables", property(lambda self: decoded.append("tables") or tables(self)))
    per_group = {}
    for n in (GROUPS, 2 * GROUPS):
        d = str(tmp_path / str(n))
        os.makedirs(d)
        write_groups_run(d, n)
        run = load_run(d, workers=1, times=True)
        run.group_names()  # (the group index: counted in the linear test above)
        stats = _lines_of(lambda: compute(run))
        report = analyse(load_run(d, workers=1))

        def first_screen():
            grid = Grid(report, None)
            panes.overview(report)
            assert grid.event(grid.columns[0].rep, 0).where() == "train.py:110"
        per_group[n] = (stats, _lines_of(first_screen))
    stats, screen = ((b - a) / GROUPS for a, b in zip(per_group[GROUPS], per_group[2 * GROUPS]))
    assert stats <= 300 and screen <= 40, per_group
    assert decoded == [], decoded
