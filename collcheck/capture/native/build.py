"""Building the compiled recording path without an extra step: the first `collcheck` command
builds it, in the background (`diff`, `show`, `tui`, ...) or before it goes on (`record`,
`demo`: they launch jobs at once).

Never inside a training job (a build takes about a minute and a compiler): only the command line
calls `start`. Whether this collcheck, torch and Python have been through a build is told by stamp
files named by a hash of the sources and versions, computed without importing torch (a `collcheck
diff` does not pay for torch's import): `<stamp>.built`, or `.skipped` / `.failed` with the reason
(not tried again: `collcheck build-fastpath` does). The background build runs
`python -m collcheck.capture.native.build <stamp>` detached, under a lock, its output in `<stamp>.log`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from importlib import metadata

from ...base.outputs import atomic_output
from ...base.settings import Settings
from . import fastpath

OUTCOMES = (".built", ".skipped", ".failed")


def cache_dir() -> str:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(root, "collcheck")


def stamp() -> str:
    """The stamp files' common path for these sources, this torch and this Python."""
    h = hashlib.sha256()
    for path in fastpath.SOURCES:
        with open(path, "rb") as f:
            h.update(f.read())
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "?"
    for part in (torch_version, sys.version, str(fastpath.CFLAGS), os.environ.get("TORCH_EXTENSIONS_DIR", "")):
        h.update(b"\0" + part.encode())
    return os.path.join(cache_dir(), f"fastpath-{h.hexdigest()[:16]}")


def outcome(base: str) -> tuple[str, str] | None:
    """(".built" | ".skipped" | ".failed", its text) of the last build of `base`, None: none yet."""
    for suffix in OUTCOMES:
        try:
            with open(base + suffix) as f:
                return suffix, f.read().strip()
        except OSError:
            continue
    return None


def building(base: str) -> bool:
    """Whether a build holds the lock now."""
    if not os.path.exists(base + ".lock"):
        return False
    try:
        with _append(base + ".lock") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)
            return False
    except OSError:
        return True


def start(foreground: bool) -> None:
    """From the command line: build the compiled path once if it was never tried for this torch,
    `foreground` before returning, else in a detached process. Never raises, never repeats."""
    if fastpath.setting() == "off":
        return
    try:
        base = stamp()
        if outcome(base) is not None or building(base):
            return
        os.makedirs(cache_dir(), exist_ok=True)
        if foreground:
            print("collcheck: compiling the recording fast path against torch, once (about a minute) ...",
                  file=sys.stderr, flush=True)
            ensure(base)
            return
        with _append(base + ".log") as log:
            subprocess.Popen([sys.executable, "-m", "collcheck.capture.native.build", base], stdin=subprocess.DEVNULL,
                             stdout=log, stderr=log, start_new_session=True, close_fds=True)
        print("collcheck: compiling the recording fast path in the background, once (about a minute; "
              "`collcheck build-fastpath --status`)", file=sys.stderr, flush=True)
    except Exception as exc:  # the command the user ran goes on regardless
        print(f"collcheck: could not start building the fast path ({type(exc).__name__}: {exc})", file=sys.stderr)


def ensure(base: str) -> int:
    """Build unless built, one build at a time (a lock), and stamp the outcome; 0 when built."""
    os.makedirs(os.path.dirname(base), exist_ok=True)
    with _append(base + ".lock") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return 0  # another command is building it
        if not os.path.exists(fastpath.library_path()):
            missing = fastpath.missing_tools()
            if missing:
                return record(base, ".skipped", f"{' and '.join(missing)} not found (a C++ compiler, CXX, and "
                                                "ninja are needed)")
            try:
                fastpath.build(verbose=Settings.from_env().build_verbose)
            except Exception as exc:
                return record(base, ".failed", f"{type(exc).__name__}: {exc}"[:2000])
        return record(base, ".built", fastpath.library_path())


def record(base: str, suffix: str, text: str) -> int:
    """Stamp an outcome (replacing earlier ones); 0 for a build."""
    os.makedirs(os.path.dirname(base), exist_ok=True)
    for other in OUTCOMES:
        if other != suffix and os.path.exists(base + other):
            os.remove(base + other)
    with atomic_output(base + suffix, replace_link=True) as f:
        f.write(text + "\n")
    return 0 if suffix == ".built" else 2


def _append(path: str):
    """`path` opened to append (made when missing), never through a link (base/outputs.py)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.fdopen(os.open(path, flags, 0o644), "ab")


def command(status: bool, verbose: bool = False) -> int:
    """`collcheck build-fastpath [--status]`: build now (again, after a skipped or failed try), or
    say whether new jobs record with the compiled path, and if not, why."""
    path = fastpath.library_path()
    base = stamp()
    if status:
        built = os.path.exists(path)
        if built and fastpath.setting() == "off":
            print(f"built: {path}\nnot in use: COLLCHECK_FASTPATH=0")
        elif built:
            print(f"built: {path}\nin use: new jobs record with the compiled path")
        else:
            print(f"not built: {path}")
            print(_why_not(base))
        return 0 if built else 1
    if verbose and not os.path.exists(path):
        os.environ["COLLCHECK_BUILD_VERBOSE"] = "1"
    print("collcheck: compiling the recording fast path against torch (about a minute) ...", file=sys.stderr,
          flush=True)
    for suffix in OUTCOMES[1:]:  # a new try
        if os.path.exists(base + suffix):
            os.remove(base + suffix)
    rc = ensure(base)
    found = outcome(base)
    if rc or found is None:
        print(f"collcheck: {found[1] if found else 'another command is building it now'}; recording keeps "
              "using the Python path", file=sys.stderr)
        return 2
    print(path)
    return 0


def _why_not(base: str) -> str:
    if fastpath.setting() == "off":
        return "not built: COLLCHECK_FASTPATH=0 (the first collcheck command builds it otherwise)"
    if building(base):
        return f"building now (started by a collcheck command; output in {base}.log)"
    found = outcome(base)
    if found is None:
        return "the next collcheck command builds it (or run `collcheck build-fastpath`)"
    if found[0] == ".skipped":
        return f"skipped: {found[1]}; recording uses the Python path"
    return f"the last build failed: {found[1]} (output in {base}.log); `collcheck build-fastpath` tries again"


if __name__ == "__main__":
    sys.exit(ensure(sys.argv[1]))
