"""The commands' small C libraries (the log reader's loop, the dump scanner): each one C file that
includes only libc's headers, built once with the system's C compiler into the cache and loaded
with ctypes by its module. Built where a command first needs it (a fraction of a second); a
failing compiler is recorded beside it (`.failed`, why) and not tried again for those sources."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from .errors import UsageError
from .outputs import atomic_output

CFLAGS = ("-O2", "-shared", "-fPIC", "-std=c99")


def built(source: str, cache: str) -> str | None:
    """The library of `source` in `cache` (named after the file and a hash of it and the flags),
    compiled now unless it was; None where it cannot be."""
    h = hashlib.sha256()
    with open(source, "rb") as f:
        h.update(f.read())
    h.update(" ".join(CFLAGS).encode() + sys.platform.encode())
    stem = os.path.splitext(os.path.basename(source))[0]
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
        done = subprocess.run([compiler, *CFLAGS, "-o", tmp, source], capture_output=True, timeout=120)
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
