"""The commands' small C libraries (the log reader's loop, the dump scanner): each a few C files
in a folder of their own that include only libc's headers and theirs, built once with the system's C compiler into the cache and loaded
with ctypes by its module. Built where a command first needs it (a fraction of a second); a
failing compiler is recorded beside it (`.failed`, why) and not tried again for those sources."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from .errors import UsageError
from .outputs import atomic_output
from .settings import Settings

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=c99")


def built(sources: list[str], cache: str) -> str | None:
    """The library of `sources` (C files of one folder) in `cache`, named after the first and a hash
    of them, the headers beside them and the flags; compiled now unless it was; None where it
    cannot be."""
    folder = os.path.dirname(sources[0])
    h = hashlib.sha256()
    for name in [*sources, *sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".h"))]:
        with open(name, "rb") as f:
            h.update(f.read())
    h.update(" ".join(CFLAGS).encode() + sys.platform.encode())
    stem = os.path.splitext(os.path.basename(sources[0]))[0]
    path = os.path.join(cache, f"{stem}-{h.hexdigest()[:16]}.so")
    if os.path.isfile(path):
        return path
    if os.path.exists(path + ".failed"):
        return None
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        return None
    os.makedirs(cache, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{stem}-", suffix=".so.tmp", dir=cache)
    os.close(fd)
    try:
        done = subprocess.run([compiler, *CFLAGS, "-o", tmp, *sources], capture_output=True, timeout=120)
        if done.returncode != 0:
            with contextlib.suppress(UsageError), atomic_output(path + ".failed", "wb", replace_link=True) as f:
                f.write(done.stderr[-4000:])
            return None
        os.replace(tmp, path)  # (atomic: a process beside this one loads either none or all)
        return path
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def loaded(sources: list[str]):
    """The library of `sources` loaded with ctypes, built first unless it was; None where it cannot
    be (no compiler, caching off, COLLCHECK_READER=python: the caller reads with Python)."""
    settings = Settings.from_env()
    if settings.reader == "python" or not settings.cache_dir:
        return None
    try:
        path = built(sources, settings.cache_dir)
        return ctypes.CDLL(path) if path else None
    except OSError:
        return None
