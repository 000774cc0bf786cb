"""Every file a command writes is created fresh (docs/security.md, 'Outputs are created fresh'):
a link planted at an output's name is refused or replaced, never written through (what it points
to keeps its bytes and its 0600 mode), and an output onto one of the command's inputs is refused
with one line and exit 2, the inputs byte-identical after. The real command line on runs and
dumps built in memory; the writers that replay are refused before any replay starts."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat

import pytest

from collcheck import synth
from support.cli import run_cli
from support.fr_dumps import dump, entry, write_dumps
from support.logbytes import small_program

SECRET = b"private key material\n"
LOG0, LOG1 = "rank-00000.0.msgpack", "rank-00001.0.msgpack"
SOURCE = "import torch.distributed as dist\n\ndef step(rank):\n    if rank == 0:\n        dist.barrier()\n"


@pytest.fixture
def job(tmp_path):
    """A run of two ranks (a finding), a training script, two ranks' Flight Recorder dumps, and a
    private file and folder elsewhere (what planted links point to)."""
    synth.write_run(str(tmp_path / "run"), small_program(2), [synth.Fault("shape_mismatch", 1, 1)])
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(SOURCE)
    members = {"0": [0, 1]}
    write_dumps(tmp_path / "dumps", {r: dump([entry(i, "0", i, "allreduce", (4,)) for i in range(3)], members)
                                     for r in (0, 1)})
    secret = tmp_path / "elsewhere" / "id_rsa"
    secret.parent.mkdir()
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    (tmp_path / "out").mkdir()
    return tmp_path


def _snapshot(*folders) -> dict:
    """Every file under the folders: its bytes, its mode, whether it is a link."""
    found = {}
    for folder in folders:
        for dirpath, _, files in os.walk(folder):
            for name in files:
                p = os.path.join(dirpath, name)
                with open(p, "rb") as f:
                    found[p] = (f.read(), os.lstat(p).st_mode)
    return found


def _refused(res):
    assert res.code == 2, (res.out, res.err)
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collcheck: error: cannot write"), res.err
    assert "replaying" not in res.out  # (replay: refused before any process started)


# each writing option: (argv, given the job folder and the target; whether the target is a folder)
WRITERS = {
    "diff -o": (lambda j, t: ("diff", j / "run", "-o", t), False),
    "lint -o": (lambda j, t: ("lint", j / "src", "-o", t), False),
    "export -o (perfetto)": (lambda j, t: ("export", j / "run", "-o", t), False),
    "export --format fr -o": (lambda j, t: ("export", j / "run", "--format", "fr", "-o", t), True),
    "export dumps --format fr -o": (lambda j, t: ("export", j / "dumps", "--format", "fr", "-o", t), True),
    "replay --emit-script": (lambda j, t: ("replay", j / "run", "--emit-script", t, "--max-tests", "1"), False),
    "replay --keep": (lambda j, t: ("replay", j / "run", "--keep", t), True),
}


@pytest.mark.parametrize("writer", WRITERS)
def test_no_writer_follows_a_link_planted_at_its_target(job, writer):
    argv, folder = WRITERS[writer]
    target = job / "out" / "planted"
    target.symlink_to(job / "elsewhere" if folder else job / "elsewhere" / "id_rsa", target_is_directory=folder)
    before = _snapshot(job / "elsewhere", job / "run", job / "src", job / "dumps")
    _refused(run_cli(*argv(job, target), env={"XDG_CACHE_HOME": str(job / "cache")}))
    assert _snapshot(job / "elsewhere", job / "run", job / "src", job / "dumps") == before
    assert stat.S_IMODE((job / "elsewhere" / "id_rsa").stat().st_mode) == 0o600 and target.is_symlink()


@pytest.mark.parametrize("source", ["run", "dumps"])
def test_fr_export_writes_no_dump_when_one_name_in_its_folder_is_a_link(job, source):
    out = job / "out" / "fr"
    out.mkdir()
    (out / "rank_1").symlink_to(job / "elsewhere" / "id_rsa")
    res = run_cli("export", job / source, "--format", "fr", "-o", out, env={"XDG_CACHE_HOME": str(job / "cache")})
    _refused(res)
    assert sorted(os.listdir(out)) == ["rank_1"]  # every name checked before the first is written
    assert (job / "elsewhere" / "id_rsa").read_bytes() == SECRET


# an output onto what the command reads: (argv given the job folder)
ONTO_INPUTS = {
    "diff -o a log of the run": lambda j: ("diff", j / "run", "-o", j / "run" / LOG0),
    "diff -o a new log name in the run": lambda j: ("diff", j / "run", "-o", j / "run" / "rank-00007.0.msgpack"),
    "diff -o a SIGTERM dump the run reads": lambda j: ("diff", j / "run", "-o", j / "run" / "rank-00001.0.sigterm.txt"),
    "diff -o the log file read": lambda j: ("diff", j / "run" / LOG1, "-o", j / "run" / LOG1),
    "diff -o a hard link of a log": lambda j: ("diff", j / "run", "-o", j / "out" / "hard"),
    "diff -o a dump read": lambda j: ("diff", j / "dumps", "-o", j / "dumps" / "comm_lib_trace_rank_0"),
    "export -o a log": lambda j: ("export", j / "run", "-o", j / "run" / LOG1),
    "export --format fr -o the run": lambda j: ("export", j / "run", "--format", "fr", "-o", j / "run"),
    "export --format fr -o inside the run": lambda j: ("export", j / "run", "--format", "fr", "-o", j / "run" / "fr"),
    "export --format fr -o the dumps": lambda j: ("export", j / "dumps", "--format", "fr", "-o", j / "dumps"),
    "lint -o the file linted": lambda j: ("lint", j / "src" / "train.py", "-o", j / "src" / "train.py"),
    "lint -o a Python file of the folder linted": lambda j: ("lint", j / "src", "-o", j / "src" / "report.py"),
    "lint --logs -o a log of that run": lambda j: ("lint", j / "src", "--logs", j / "run", "-o", j / "run" / LOG0),
    "replay --emit-script onto a log": lambda j: ("replay", j / "run", "--emit-script", j / "run" / LOG0),
    "replay --keep the run": lambda j: ("replay", j / "run", "--keep", j / "run"),
    "replay --keep inside the run": lambda j: ("replay", j / "run", "--keep", j / "run" / "kept"),
}


@pytest.mark.parametrize("case", ONTO_INPUTS)
def test_an_output_onto_an_input_is_refused_and_the_inputs_are_unchanged(job, case):
    os.link(job / "run" / LOG0, job / "out" / "hard")
    before = _snapshot(job / "run", job / "src", job / "dumps")
    folders = {p: sorted(os.listdir(job / p)) for p in ("run", "src", "dumps")}
    _refused(run_cli(*ONTO_INPUTS[case](job), env={"XDG_CACHE_HOME": str(job / "cache")}))
    assert _snapshot(job / "run", job / "src", job / "dumps") == before
    assert {p: sorted(os.listdir(job / p)) for p in ("run", "src", "dumps")} == folders  # nothing added either


def test_a_report_beside_the_inputs_or_over_an_old_report_is_written(job):
    for target in (job / "run" / "report.json", job / "out" / "report.json", job / "out" / "report.json"):
        res = run_cli("diff", job / "run", "--format", "json", "-o", target)
        assert res.code == 1 and target.read_text().startswith("{"), res.err
    res = run_cli("export", job / "run", "-o", job / "out" / "trace.json")
    assert res.code == 0 and json.loads((job / "out" / "trace.json").read_text())["traceEvents"], res.err
    res = run_cli("export", job / "dumps", "--format", "fr", "-o", job / "out" / "fr",
                  env={"XDG_CACHE_HOME": str(job / "cache")})
    assert res.code == 0, res.err
    with open(job / "out" / "fr" / "rank_1", "rb") as f:
        assert pickle.load(f)["entries"]


def test_a_link_in_place_of_a_cached_conversion_is_replaced_not_followed(job):
    env = {"XDG_CACHE_HOME": str(job / "cache")}
    first = run_cli("diff", job / "dumps", "--format", "json", env=env)
    assert first.code in (0, 1, 4), first.err
    (entry_dir,) = (job / "cache" / "collcheck" / "fr").iterdir()
    shutil.rmtree(entry_dir)
    entry_dir.symlink_to(job / "elsewhere", target_is_directory=True)  # what a conversion would be read from
    before = _snapshot(job / "elsewhere")
    again = run_cli("diff", job / "dumps", "--format", "json", env=env)
    assert (again.code, again.out) == (first.code, first.out), again.err
    assert not entry_dir.is_symlink() and (entry_dir / "done").is_file()
    assert _snapshot(job / "elsewhere") == before


def test_the_live_report_replaces_links_left_at_its_names(job, capsys):
    from collcheck.cli.live import judge
    from collcheck.report.live import REPORT_NAME

    for name in (".txt", ".json", ".txt.tmp", ".json.tmp"):  # (the last two: a predictable temporary name)
        (job / "run" / (REPORT_NAME + name)).symlink_to(job / "elsewhere" / "id_rsa")
    assert judge(str(job / "run"), {"kind": "divergence"}) is not None
    for suffix in (".txt", ".json"):
        written = job / "run" / (REPORT_NAME + suffix)
        assert not written.is_symlink() and "shape" in written.read_text()
    assert (job / "elsewhere" / "id_rsa").read_bytes() == SECRET
    assert stat.S_IMODE((job / "elsewhere" / "id_rsa").stat().st_mode) == 0o600
    capsys.readouterr()


def test_build_stamps_and_the_sigterm_dump_file_never_write_through_links(job):
    from collcheck.capture import watchdog
    from collcheck.capture.native import build

    secret = job / "elsewhere" / "id_rsa"
    base = str(job / "out" / "fastpath-0123")
    os.symlink(secret, base + ".skipped")
    assert build.record(base, ".skipped", "no compiler") == 2
    assert not os.path.islink(base + ".skipped") and build.outcome(base) == (".skipped", "no compiler")
    os.symlink(secret, base + ".lock")
    with pytest.raises(OSError):
        build.ensure(base)  # the lock is not opened through the link
    log = job / "out" / LOG0
    (job / "out" / "rank-00000.0.sigterm.txt").symlink_to(secret)
    watchdog.register_sigterm_dump(str(log))
    try:
        assert not (job / "out" / "rank-00000.0.sigterm.txt").is_symlink()
    finally:
        watchdog.unregister_sigterm_dump()
    assert secret.read_bytes() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600


@pytest.mark.slow
def test_a_replay_kept_in_a_folder_with_planted_links_replaces_them(job):
    """--keep into a folder a previous replay left, its files now links: each is replaced; the
    script is a new executable file (a real replay: about 10 s)."""
    keep = job / "out" / "keep"
    (keep / "replay").mkdir(parents=True)
    for name in ("plan.json", "rank0.err", "rank1.err"):
        (keep / "replay" / name).symlink_to(job / "elsewhere" / "id_rsa")
    script = job / "out" / "repro.py"
    res = run_cli("replay", job / "run", "--keep", keep, "--emit-script", script, "--no-minimize")
    assert res.code == 1, (res.out, res.err)
    for name in ("plan.json", "rank0.err", "rank1.err"):
        assert not (keep / "replay" / name).is_symlink()
    assert os.access(script, os.X_OK) and (job / "elsewhere" / "id_rsa").read_bytes() == SECRET
    assert stat.S_IMODE((job / "elsewhere" / "id_rsa").stat().st_mode) == 0o600
