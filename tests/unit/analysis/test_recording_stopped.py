"""A log whose recording stopped (its Q record: a write of the log failed, or an internal error)
reads as `recording stopped: <why>`, unknown after its last record: never killed or hung, never a
rank that skipped what the others issued after. The runs are written with the recorder's own
LogWriter, whose `stop` writes the record as the recorder does when the disk fills."""

from __future__ import annotations

import errno
import io
import json
import xml.etree.ElementTree as ET

from support.cli import run_cli
from support.runs import Call, write

from collcheck.analysis.diff import analyse
from collcheck.logfile import format as lf
from collcheck.logfile.writer import LogWriter, open_exclusive
from collcheck.model import load_run
from collcheck.report import render

NOSPACE = "could not write the log: No space left on device (ENOSPC)"


def calls(n: int, size: int = 4) -> list[Call]:
    return [Call(line=10 + i % 3, size=size) for i in range(n)]


def test_a_finished_job_whose_disk_filled_has_no_hang(tmp_path):
    """Both ranks stopped recording, at different collectives; the job went on to its end. Their
    last collectives' completions were lost with the write that failed: neither pending nor done."""
    run = write(str(tmp_path), {"0": (0, 1)}, {0: calls(9), 1: calls(6)}, stopped={0: errno.ENOSPC, 1: errno.ENOSPC})
    for r, n in ((0, 9), (1, 6)):
        log = run.ranks[r]
        assert (log.state, log.stopped, len(log)) == ("recording-stopped", NOSPACE, n)
        assert not log.trailer and not log.pending and log.unknown_completion == {n - 1}
    report = analyse(run)
    assert (report.verdict, report.findings, report.hang.inside) == ("incomplete", [], set())
    assert not report.hang.graph.number_of_edges() and report.hang.root_causes == []
    for r, n in ((0, 9), (1, 6)):
        st = report.hang.states[r]
        assert (st.state, st.blocked) == ("recording-stopped", [])
        assert st.detail == f"recording stopped after {n} collectives: {NOSPACE}; unknown after that"
    assert run.unchecked == [f"ranks 0-1: recording stopped after 6-9 collectives ({NOSPACE}): what they did after "
                             "that is not known and was not checked"]
    assert "group 0: rank 1 checked up to #6 only (its recording stopped there)" in run.warnings
    assert "group 0: rank 0 checked up to #9 only (its recording stopped there)" in run.warnings


def test_the_exit_code_is_incomplete_unless_something_diverged_before(tmp_path):
    """What CI gets: 4 (ranks not checked to the end) for the cut alone; 1 for a divergence
    before the cut, which is still found."""
    clean, bad = tmp_path / "clean", tmp_path / "bad"
    write(str(clean), {"0": (0, 1)}, {0: calls(8), 1: calls(5)}, stopped={1: errno.EFBIG})
    assert run_cli("diff", clean).code == 4
    assert run_cli("diff", clean, "--exit-zero").code == 0
    diverged = calls(5)
    diverged[2] = Call(line=diverged[2].line, size=8)
    write(str(bad), {"0": (0, 1)}, {0: calls(8), 1: diverged}, stopped={1: errno.EFBIG})
    res = run_cli("diff", bad, "--format", "json")
    report = json.loads(res.out)
    assert res.code == 1 and [(f["kind"], f["position"], f["ranks"]) for f in report["findings"]] == [
        ("shape_mismatch", 2, [1])]
    assert report["ranks"]["1"]["state"] == "recording-stopped" and "File too large (EFBIG)" in report["ranks"]["1"]["detail"]


def test_a_rank_that_stopped_recording_skipped_nothing(tmp_path):
    """Rank 0 finished normally with more collectives, on a group rank 1 had not used yet either:
    rank 1's sequence is unknown after its last record in every group, never 'missing'."""
    more = calls(6) + [Call(line=20, group="1"), Call(line=21)]
    run = write(str(tmp_path), {"0": (0, 1), "1": (0, 1)}, {0: more, 1: calls(4)}, stopped={1: errno.EDQUOT})
    report = analyse(run)
    assert report.findings == [] and report.verdict == "incomplete"
    assert report.hang.states[0].state == "finished"
    assert "group 1: rank 1 checked up to #0 only (its recording stopped there)" in run.warnings


def test_an_internal_error_reads_as_recording_stopped_too(tmp_path):
    """The recorder's own Q (an internal error) with the trailer after it: the process exited
    normally, what it issued after the error is not known."""
    fd, path = open_exclusive(str(tmp_path), "rank-00000.0")
    w = LogWriter(fd, path)
    with w.lock:
        w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": 0, "world": 1, "run": "u"})
        w.write({"k": lf.DISABLED, "m": "TypeError('boom')", "ts": 5})
        w.write({"k": lf.TRAILER, "ts": 9})
    w.close()
    run = load_run(str(tmp_path))
    st = analyse(run).hang.states[0]
    assert (st.state, run.ranks[0].stopped) == ("recording-stopped", "an internal error in collcheck: TypeError('boom')")
    assert st.detail == ("recording stopped after 0 collectives: an internal error in collcheck: TypeError('boom'); "
                         "unknown after that; the process then exited normally")


def test_every_report_says_why_recording_stopped(tmp_path):
    run = write(str(tmp_path), {"0": (0, 1)}, {0: calls(7), 1: calls(5)}, stopped={1: errno.ENOSPC})
    report = analyse(run)
    text = run_cli("diff", str(tmp_path), columns=300).out
    assert "verdict: INCOMPLETE" in text and "HANG" not in text
    assert f"recording stopped after 5 collectives: {NOSPACE}; unknown after that" in text
    out = io.StringIO()
    render(report, "junit", out)
    suite = ET.fromstring(out.getvalue())
    (skipped,) = suite.iter("skipped")
    assert skipped.get("message") == f"recording stopped: {NOSPACE}; not checked after that"
    assert suite.get("failures") == "0" and suite.get("tests") == "3"  # group 0, hang, rank 1's recording
    out = io.StringIO()
    render(report, "github", out)
    assert out.getvalue().splitlines() == [
        f"::warning title=collcheck%3A recording stopped::rank 1: recording stopped: {NOSPACE}; not checked after that",
        "::notice title=collcheck::no divergence found in what could be checked"]
    shown = run_cli("show", run.ranks[1].path, columns=200).out
    assert "state: recording-stopped" in shown
    assert f"recording stopped: {NOSPACE} (after 5 collectives; what came after is not known)" in shown


def test_the_tui_overview_shows_recording_stopped(tmp_path):
    from collcheck.tui.grid import Grid
    from collcheck.tui.widgets.panes import overview

    run = write(str(tmp_path), {"0": (0, 1)}, {0: calls(7), 1: calls(5)}, stopped={1: errno.ENOSPC})
    report = analyse(run)
    console_out = io.StringIO()
    from rich.console import Console

    Console(file=console_out, width=220).print(overview(report))
    shown = " ".join(console_out.getvalue().split())
    assert "recording stopped: its end is not known" in shown and "No space left on device (ENOSPC)" in shown
    grid = Grid(report, "0")
    texts = dict((r, t) for ranks, t in grid.step_states(6) for r in ranks)
    assert texts[1] == "unknown from #6 (recording stopped)"
