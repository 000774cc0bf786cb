"""base/outputs.py, the one way collcheck writes a file: a new file renamed into place, never
written through a link, never over an input; permissions set on the new file alone."""

from __future__ import annotations

import contextlib
import os
import stat

import pytest

from collcheck.base.errors import UsageError
from collcheck.base.outputs import (DIGITS, Inputs, atomic_output, check_folder, check_output, new_file,
                                    output_folder, subfolder)

SECRET = b"private key material\n"


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def private(tmp_path):
    """A 0600 file elsewhere: what a planted link points to."""
    path = tmp_path / "elsewhere" / "id_rsa"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def untouched(path) -> bool:
    return path.read_bytes() == SECRET and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_new_file_gets_the_umask_permissions_and_a_script_the_executable_ones(tmp_path):
    with umask(0o022):
        with atomic_output(str(tmp_path / "report.txt")) as f:
            f.write("report\n")
        with atomic_output(str(tmp_path / "repro.py"), executable=True) as f:
            f.write("print()\n")
    with umask(0o077):
        with atomic_output(str(tmp_path / "mine.txt")) as f:
            f.write("x")
    assert (tmp_path / "report.txt").read_text() == "report\n"
    assert stat.S_IMODE((tmp_path / "report.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "repro.py").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "mine.txt").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt", "report.txt", "repro.py"]  # no temp left


def test_a_file_is_replaced_whole_not_rewritten_in_place(tmp_path):
    target = tmp_path / "report.txt"
    target.write_text("old\n")
    hard = tmp_path / "hard-link"
    os.link(target, hard)  # another name of the old file: it keeps the old bytes
    with atomic_output(str(target)) as f:
        f.write("new\n")
    assert target.read_text() == "new\n" and hard.read_text() == "old\n"


def test_a_link_at_the_target_is_refused_and_what_it_points_to_is_untouched(tmp_path):
    secret = private(tmp_path)
    link = tmp_path / "repro.py"
    link.symlink_to(secret)
    for attempt in (lambda: check_output(str(link)),
                    lambda: atomic_output(str(link), executable=True).__enter__()):
        with pytest.raises(UsageError, match="symbolic link"):
            attempt()
    assert untouched(secret) and link.is_symlink()


def test_a_link_that_appears_during_the_write_is_replaced_not_followed(tmp_path):
    secret = private(tmp_path)
    target = tmp_path / "report.txt"
    with atomic_output(str(target), executable=True) as f:
        f.write("report\n")
        target.symlink_to(secret)  # planted between the check and the rename
    assert not target.is_symlink() and target.read_text() == "report\n" and untouched(secret)


def test_replace_link_replaces_a_planted_link_with_the_new_file(tmp_path):
    secret = private(tmp_path)
    target = tmp_path / "live-report.txt"
    target.symlink_to(secret)
    with atomic_output(str(target), replace_link=True) as f:
        f.write("finding\n")
    assert not target.is_symlink() and target.read_text() == "finding\n" and untouched(secret)


def test_a_failed_write_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path):
    target = tmp_path / "report.txt"
    target.write_text("before\n")
    with pytest.raises(ZeroDivisionError):
        with atomic_output(str(target)) as f:
            f.write("half")
            1 / 0
    assert target.read_text() == "before\n" and [p.name for p in tmp_path.iterdir()] == ["report.txt"]


@pytest.mark.parametrize("case", ["input", "hard link of an input", "link to an input", "named in a read folder",
                                  "folder", "no folder"])
def test_an_input_a_folder_or_a_missing_folder_is_refused(tmp_path, case):
    run = tmp_path / "run"
    run.mkdir()
    log = run / "rank-00000.0.msgpack"
    log.write_bytes(b"log")
    inputs = Inputs((str(log),), ((str(run), (".msgpack",)),))
    target = {"input": log, "hard link of an input": tmp_path / "copy", "link to an input": tmp_path / "via",
              "named in a read folder": run / "rank-9.msgpack", "folder": run,
              "no folder": tmp_path / "no" / "r.txt"}[case]
    if case == "hard link of an input":
        os.link(log, target)
    if case == "link to an input":
        target.symlink_to(log)
    with pytest.raises(UsageError, match=f"^cannot write {target}: "):
        with atomic_output(str(target), inputs=inputs) as f:
            f.write("report")
    assert log.read_bytes() == b"log"


def test_a_report_next_to_the_inputs_under_another_name_is_written(tmp_path):
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    inputs = Inputs((), ((str(dumps), DIGITS),))
    check_output(str(dumps / "report.json"), inputs)
    with pytest.raises(UsageError):
        check_output(str(dumps / "rank_7"), inputs)  # read as rank 7's dump next time


def test_a_device_named_as_the_target_is_written_in_place():
    with atomic_output(os.devnull) as f:
        f.write("discarded")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_an_output_folder_is_refused_when_a_link_a_file_or_a_folder_read(tmp_path):
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    inputs = Inputs((), ((str(run), (".msgpack",)),))
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "file").write_text("x")
    for bad, why in [("linked", "symbolic link"), ("file", "not a folder"), ("run", "reads"), ("run/sub", "reads")]:
        with pytest.raises(UsageError, match=why):
            check_folder(str(tmp_path / bad), inputs)
    assert not (tmp_path / "elsewhere").exists()
    made = output_folder(str(tmp_path / "new" / "dumps"), inputs)
    assert os.path.isdir(made)


def test_files_and_folders_made_in_a_folder_replace_links_or_refuse_them(tmp_path):
    secret = private(tmp_path)
    (tmp_path / "rank0.err").symlink_to(secret)
    with new_file(str(tmp_path / "rank0.err")) as f:
        f.write("child output")
        f.seek(0)
        assert f.read() == "child output"
    assert not (tmp_path / "rank0.err").is_symlink() and untouched(secret)
    (tmp_path / "logs").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(UsageError, match="link"):
        subfolder(str(tmp_path), "logs")
    assert subfolder(str(tmp_path), "replay") == str(tmp_path / "replay") and (tmp_path / "replay").is_dir()
    assert subfolder(str(tmp_path), "replay") == str(tmp_path / "replay")  # kept when it is one already
