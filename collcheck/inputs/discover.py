"""What a path given to collcheck points to: a run directory of collcheck logs, one log file, a
list of files, PyTorch Flight Recorder dumps, or a logs root holding several launches (all their
logs, which launches.py tells apart; or, with `newest`, the newest run directory, for `replay`).
Several paths (one folder per node of a job whose nodes wrote to their own disks) are read as
one: every log (or every dump) they hold (`discover_all`).
Found in one walk of the directory (each folder listed once); the dumps are converted
to logs once, when their logs are first asked for (flight_recorder/convert.py).

Only regular files are opened: a FIFO or a device named like a log is refused (reading it would
block or never end), one among the dumps is passed over (torch's NCCL dump trigger is a FIFO,
`<prefix><rank>.pipe`), and one named as the target is refused.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass, field

from ..base.outputs import DIGITS, Inputs
from ..base.untrusted import one_line
from ..logfile import format as lf
from ..logfile.reader import LogError, file_kind
from .flight_recorder.load import is_regular, read_dump_bytes, sniff

MAX_LOGS = 1 << 20  # log files under one run directory (a run has one per rank and restart)

RUN, LOG, FILES, DUMPS = "run", "log", "files", "dumps"  # Source.kind


@dataclass
class Source:
    """What `discover` found: `kind` (RUN: a directory of logs; LOG: one log file; FILES: a list of
    log files; DUMPS: Flight Recorder dumps, a directory, one file or a list), `path` (the run
    directory read, the newest of a logs root, or the one file named; None for a list) and `found`
    (the logs, or the dumps: sorted, a list's in its order)."""

    kind: str
    path: str | None
    found: list[str]
    _logs: list[str] | None = field(default=None, init=False, repr=False)
    # the checked headers of `logs`, in their order, where launches.py read them all and found one
    # launch: load_run takes them from here rather than reading every header again
    headers: list[dict] | None = field(default=None, init=False, repr=False)
    parts: tuple = ()  # the Sources of several paths read as one (discover_all)

    @property
    def logs(self) -> list[str]:
        """The collcheck logs to read: those found, or those converted from the dumps (the first
        time this is asked; cached by their content under ~/.cache/collcheck/fr)."""
        if self._logs is None:
            if self.kind == DUMPS:
                from .flight_recorder.convert import convert

                self._logs = _logs_under(convert(self.found))
            else:
                self._logs = self.found
        return self._logs

    def inputs(self) -> Inputs:
        """What a command that reads this source reads, so that no output lands on it
        (base/outputs.py): its files (and the SIGTERM dumps next to logs), and the folder walked
        whole with the names read there: logs and SIGTERM dumps in a run directory, every file
        named <prefix><rank> in a folder of dumps."""
        if self.parts:
            return sum((part.inputs() for part in self.parts), Inputs())
        named = tuple(self.found)
        files = named + tuple(p[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX for p in named if p.endswith(lf.LOG_SUFFIX))
        if self.kind == RUN:
            return Inputs(files, ((self.path, (lf.LOG_SUFFIX, lf.SIGTERM_SUFFIX)),))
        if self.kind == DUMPS and self.path is not None and os.path.isdir(self.path):
            return Inputs(files, ((self.path, DIGITS),))
        return Inputs(files)


def discover(target: str | list[str], newest: bool = False) -> Source:
    """What `target` (a path, or a list of files) points to; LogError (one line) when it holds
    nothing collcheck reads. `newest`: a logs root (no log at its top, several directories) is
    taken as its newest run, said on stderr."""
    if not isinstance(target, str):
        files = list(target)
        dumps = [p for p in files if sniff(p)]
        return Source(DUMPS if dumps and len(dumps) == len(files) else FILES, None, files)
    if not os.path.isdir(target):
        return _one_file(target)
    entries = _listing(target)
    if newest:
        chosen = _newest_run(target, entries)
        if chosen is not None:
            target, entries = chosen, _listing(chosen)
    logs, named_log, others = _walk(target, entries)
    if logs:
        return Source(RUN, target, sorted(logs))
    dumps = [] if named_log else [p for p in sorted(others) if sniff(p)]  # opened only when no log is named
    if dumps:
        return Source(DUMPS, target, dumps)
    raise _nothing_found(target)


def discover_all(targets: list[str]) -> Source:
    """Several paths read as one (a folder per node, with one run's logs, or its Flight Recorder
    dumps): every log or every dump they hold, a file named twice read once. LogError when one
    of them holds nothing collcheck reads, or when logs and dumps are mixed."""
    if len(targets) == 1:
        return discover(targets[0])
    parts = [discover(t) for t in targets]
    dumps = [p.kind == DUMPS for p in parts]
    if any(dumps) and not all(dumps):
        raise LogError("collcheck logs and Flight Recorder dumps given together: give one kind")
    found, seen = [], set()
    for part in parts:
        for path in part.found:
            key = os.path.realpath(path)
            if key not in seen:
                seen.add(key)
                found.append(path)
    source = Source(DUMPS if all(dumps) else FILES, None, sorted(found))
    source.parts = tuple(parts)
    return source


def _one_file(target: str) -> Source:
    """A path that is not a directory: a dump (by content), else a log; refused when it is
    neither a regular file nor missing."""
    if os.path.lexists(target) and not is_regular(target):
        read_dump_bytes(target)  # LogError: what it is instead of a file
    if sniff(target):
        return Source(DUMPS, target, [target])
    if not os.path.isfile(target):
        raise LogError(f"{one_line(target)}: no such file or directory")
    return Source(LOG, target, [target])


def _listing(directory: str) -> list[os.DirEntry]:
    try:
        with os.scandir(directory) as it:
            return list(it)
    except OSError as exc:
        raise LogError(f"{one_line(directory)}: cannot read: {exc.strerror}") from None


def _newest_run(root: str, entries: list[os.DirEntry]) -> str | None:
    """The newest of several run directories in a logs root (said on stderr); None when `root`
    is a run itself (a log at its top) or holds one directory at most."""
    if any(e.name.endswith(lf.LOG_SUFFIX) for e in entries):
        return None
    runs = [e.path for e in entries if _is_dir(e)]
    if len(runs) <= 1:
        return None
    newest = max(runs, key=os.path.getmtime)
    print(f"collcheck: {one_line(root)} holds {len(runs)} runs; using the newest, {one_line(newest)}", file=sys.stderr)
    return newest


def _is_dir(entry: os.DirEntry) -> bool:
    try:
        return entry.is_dir()  # (through a link)
    except OSError:
        return False


def _walk(top: str, entries: list[os.DirEntry]) -> tuple[list[str], bool, list[str]]:
    """(the regular log files under `top`, whether any file is named like a log, the other files
    while none is) from one listing of each folder, top-down as os.walk goes (links to folders
    are not followed, unreadable folders passed over). A log that is not a regular file is refused."""
    logs: list[str] = []
    others: list[str] = []
    named_log = False
    stack: list[tuple[str, list | None]] = [(top, entries)]
    while stack:
        folder, listing = stack.pop()
        if listing is None:
            try:
                listing = _listing(folder)
            except LogError:
                continue  # (as os.walk: a folder that cannot be read is passed over)
        folders = []
        for entry in listing:
            if _is_dir(entry):
                if not entry.is_symlink():
                    folders.append(entry.path)
            elif entry.name.endswith(lf.LOG_SUFFIX):
                named_log = True
                _add_log(logs, entry.path, entry)
            elif not named_log:
                others.append(entry.path)
        if len(logs) > MAX_LOGS:
            raise LogError(f"{one_line(top)}: more than {MAX_LOGS:,} log files; pass one run directory")
        stack += [(f, None) for f in reversed(folders)]
    return logs, named_log, others


def _add_log(logs: list[str], path: str, entry: os.DirEntry | None = None) -> None:
    """`path` added when it is a regular file (through a link); refused when it is something else.
    `entry`: its listing's, whose file type says so without a stat for a regular file (tens of
    thousands of logs: a stat each was most of the time to the first screen's loader; each is
    looked at again before it is opened, as before)."""
    try:
        if entry is not None and entry.is_file():
            logs.append(path)
            return
    except OSError:
        pass  # (looked at below)
    try:
        mode = os.stat(path).st_mode
    except OSError:  # a dangling link; a file removed meanwhile
        return
    if not stat.S_ISREG(mode):
        raise LogError(f"{one_line(path)}: {file_kind(mode)}, not a log file")
    logs.append(path)


def _nothing_found(top: str) -> LogError:
    return LogError(f"{one_line(top)}: no collcheck logs (*{lf.LOG_SUFFIX}) or Flight Recorder dumps found")


def _logs_under(run_dir: str) -> list[str]:
    """The logs of a directory of converted dumps."""
    logs = _walk(run_dir, _listing(run_dir))[0]
    if not logs:
        raise _nothing_found(run_dir)
    return sorted(logs)
