"""Every file a command writes (a report, a trace, a script, dumps, a replay's files) is created
fresh: never written through a link, never over one of the files the command reads.

The folders a command reads and writes next to may come from elsewhere (docs/security.md): a link
planted at the name a report is written to would make collcheck overwrite, and a chmod expose, the
file it points to; a report written onto a log destroys the input. So a target that is a link is
refused (not followed), as is one that is an input or that the command would read as one next
time; the bytes go to a new file made with O_EXCL in the target's folder, permissions set on it
alone, renamed over the target when complete. A link that appears meanwhile is replaced by the
rename, never followed; a failed write leaves the target as it was.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import tempfile
import threading
from dataclasses import dataclass

from .errors import UsageError

DIGITS = tuple("0123456789")  # Flight Recorder dumps are named <prefix><rank>
_umask_lock = threading.Lock()


@dataclass(frozen=True)
class Inputs:
    """What a command reads: `files` (each refused as a target, also under another name: a hard
    link, a link to it), and `folders`, (folder, name endings) pairs: the folder is read whole, so
    a target at or below it whose name has one of the endings is refused (it would be read next
    time, or is read now)."""

    files: tuple = ()
    folders: tuple = ()

    def __add__(self, other: Inputs) -> Inputs:
        return Inputs(self.files + other.files, self.folders + other.folders)

    @functools.cached_property
    def identities(self) -> frozenset:
        """(device, inode) of each file (through links), stat'ed once: a command writes many files."""
        found = set()
        for p in self.files:
            with contextlib.suppress(OSError):
                st = os.stat(p)
                found.add((st.st_dev, st.st_ino))
        return frozenset(found)


NO_INPUTS = Inputs()


def _why_not(path: str, inputs: Inputs, replace_link: bool = False) -> str | None:
    """Why `path` may not be written as a new file (None: it may)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return exc.strerror or str(exc)
    if st is not None and stat.S_ISLNK(st.st_mode):
        if not replace_link:
            return "it is a symbolic link (collcheck does not write through links; remove it or name another file)"
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        return "it is a folder"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"no folder {folder}"
    if st is not None and (st.st_dev, st.st_ino) in inputs.identities:
        return "it is one of the files this command reads"
    if _read_from(folder, os.path.basename(path), inputs):
        return "it is in a folder this command reads, named as the files it reads there"
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    return None


def _under(path: str, folder: str) -> bool:
    """Whether real path `path` is `folder` or below it (links resolved in both)."""
    top = os.path.realpath(folder)
    return path == top or path.startswith(top.rstrip(os.sep) + os.sep)


def _read_from(folder: str, name: str, inputs: Inputs) -> bool:
    real = os.path.realpath(folder)
    return any(name.endswith(endings) and _under(real, top) for top, endings in inputs.folders)


def check_output(path: str, inputs: Inputs = NO_INPUTS) -> None:
    """UsageError (one line) when `path` cannot be written as a new file: it is a link, a folder,
    an input, in a folder that is missing or not writable. Called before a command's work; the
    write checks again."""
    why = _why_not(path, inputs)
    if why is not None:
        raise UsageError(f"cannot write {path}: {why}")


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (/proc), else set and restored."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _open_special(path: str) -> int:
    """A device or a FIFO opened for writing without waiting: a FIFO nobody reads would block the
    command for ever (ENXIO: refused, one line); once open, writes wait as usual."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise UsageError(f"cannot write {path}: a pipe no process reads") from None
        raise
    os.set_blocking(fd, True)
    return fd


def _special(path: str) -> bool:
    """Whether `path` (not a link) is a character device or a FIFO, written in place: -o /dev/null."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


@contextlib.contextmanager
def atomic_output(path: str, mode: str = "w", *, inputs: Inputs = NO_INPUTS, executable: bool = False,
                  replace_link: bool = False):
    """An open file whose content becomes `path` when the block ends without an exception (a new
    file renamed over it: permissions from the umask, executable ones for a script); nothing
    changes at `path` otherwise. Refused (UsageError, one line) as check_output says; a link at
    `path` is replaced instead with `replace_link` (collcheck's own files: the live report, stamps)."""
    why = _why_not(path, inputs, replace_link)
    if why is not None:
        raise UsageError(f"cannot write {path}: {why}")
    encoding = None if "b" in mode else "utf-8"
    if _special(path):  # a device or a pipe the user named is written to, not replaced
        fd = _open_or_fail(path, lambda: _open_special(path))
        with os.fdopen(fd, mode, encoding=encoding) as f:
            yield f
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = _open_or_fail(path, lambda: tempfile.mkstemp(prefix="." + os.path.basename(path)[:80] + ".",
                                                             suffix=".tmp", dir=folder))
    try:
        os.fchmod(fd, (0o777 if executable else 0o666) & ~_umask())
        f = os.fdopen(fd, mode, encoding=encoding)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    try:
        yield f
    except BaseException:
        with contextlib.suppress(OSError):
            f.close()
        _remove(tmp)
        raise
    try:
        f.close()
        os.replace(tmp, path)  # (a link that appeared at `path` meanwhile is replaced, not followed)
    except OSError as exc:
        _remove(tmp)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def new_file(path: str, mode: str = "w+"):
    """A new, empty file at `path`, open (for a child process's output, read back after): created
    with O_EXCL and renamed over whatever `path` was, a link included, which is never followed."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = _open_or_fail(path, lambda: tempfile.mkstemp(prefix=".new.", dir=folder))
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        os.close(fd)
        _remove(tmp)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "errors": "replace"}))


def check_folder(path: str, inputs: Inputs = NO_INPUTS) -> None:
    """UsageError (one line) when `path` cannot be a folder to write files into: it is a link, not
    a folder, or at or below a folder the command reads (files written there would be read as
    inputs, or replace them)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"cannot write into {path}: {exc.strerror or exc}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise UsageError(f"cannot write into {path}: it is a symbolic link (collcheck does not write through links)")
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"cannot write into {path}: not a folder")
    real = os.path.realpath(path)
    if any(_under(real, top) for top, _ in inputs.folders):
        raise UsageError(f"cannot write into {path}: it is a folder this command reads, or inside one")


def output_folder(path: str, inputs: Inputs = NO_INPUTS) -> str:
    """`path`, checked as check_folder says and made when missing (its parents too): a folder to
    write files into with atomic_output."""
    check_folder(path, inputs)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write into {path}: {exc.strerror or exc}") from None
    return path


def subfolder(parent: str, name: str) -> str:
    """`parent`/`name`, a folder made in a folder collcheck writes into (kept when it is one
    already); UsageError when it is a link or not a folder."""
    path = os.path.join(parent, name)
    try:
        os.mkdir(path)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):  # (lstat: a link to a folder is not one)
            raise UsageError(f"cannot write into {path}: not a folder, or a link to one") from None
    except OSError as exc:
        raise UsageError(f"cannot write into {path}: {exc.strerror or exc}") from None
    return path


def _open_or_fail(path: str, opener):
    try:
        return opener()
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
