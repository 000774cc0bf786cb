"""`collcheck replay --emit-script` on a log from a hostile machine: the script it writes
runs under torchrun, re-issues the recorded collectives from the recorded (Windows) call site, and
runs none of the log's text as code. One rank: one worker for the replay, one for the script."""

from __future__ import annotations

import os

import pytest

from collcheck.model import load_run
from collcheck.cli import main as cli_main
from support import runs
from support.jobs import job, launch


def replay_main(argv: list[str]) -> int:
    """`collcheck replay ARGV...`, in this process."""
    return cli_main(["replay", *argv])

INJECT = '"""\nimport os; os.mkdir("pwned")\n"""'  # run as code, it would leave a folder "pwned"
FUNC = "step'''\nimport os; os.mkdir('pwned')\n'''\\"
FILE = "C:\\jobs\\new\\train.py"  # recorded on Windows: backslashes, "\n" and "\t" among them


@pytest.mark.slow  # (the default run emits and runs a script from a hostile run folder: test_replay.py)
def test_a_script_emitted_from_a_hostile_log_replays_it_and_runs_no_injected_code(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "FILE", FILE)
    run_dir = tmp_path / ("run" + INJECT)  # the run folder's name is hostile too
    run_dir.mkdir()
    runs.write(str(run_dir), {"0": (0,), INJECT: (0,)},
               {0: [runs.Call(group=INJECT, line=123456, func=FUNC), runs.Call(line=7)]},
               raised={0: "boom \x1b]0;title\x07" + INJECT})
    script = tmp_path / "repro.py"
    code = replay_main([str(run_dir), "--timeout", "2", "--emit-script", str(script), "--no-minimize"])
    shown = capsys.readouterr()
    assert code in (0, 1) and script.exists(), shown
    assert "\x1b" not in shown.out + shown.err and "\x07" not in shown.out + shown.err

    rec = launch(job(str(script), 1, timeout=120), str(tmp_path / "rec"), cwd=str(tmp_path))
    assert not [p for p in (tmp_path / "pwned", tmp_path / "rec" / "pwned", "pwned") if os.path.exists(p)]
    assert rec.rc not in (0, None), rec.tail()  # the recorded rank raised: so does the script, at its end
    assert "raised here in the recorded run" in rec.stderr, rec.tail()
    log = load_run(rec.run_dir).ranks[0]
    assert [log.event(i).site for i in range(len(log))] == [(FILE, 123456, FUNC), (FILE, 7, "train_step")]
