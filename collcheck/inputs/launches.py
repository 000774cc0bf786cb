"""The launches in a folder of logs, told apart from the headers alone, so that each is checked on
its own: CI runs many distributed tests into one logs folder.

A launch is the logs of one run id (and world size): a torchrun launch records into
`<dir>/<run id>/`, and its restarts stay one launch (the model keeps the latest restart). A run id
that holds two logs for one rank and restart was reused by several launches: a test runner's
spawned ranks (torch's MultiProcessTestCase) inherit the one id the test session exported, and a
fixed `--rdzv-id` names every torchrun launch alike. Those are told apart by time: every rank of a
launch is alive at its rendezvous, so a log (alive from its header's `wall_ns` to its file's last
write) joins the newest launch of the id whose ranks are all still alive when it starts and that
has no log of its rank yet, else it starts a launch (`<run id>#1`, `#2`, ... in start order).

The work is one header read per log, and a stat per log of a reused id; what is kept per log is
a few fields, not its header.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from ..base.errors import UsageError
from ..base.untrusted import one_line
from ..logfile.reader import read_header
from .discover import RUN, Source

SHOWN_IDS = 10  # launches named in a message that lists them
MAX_ALIVE = 32  # launches of one reused run id a log may join (those begun last)


@dataclass(frozen=True, slots=True)
class _Log:
    path: str
    run: str
    world: int
    rank: int
    restart: int
    start: int  # the header's wall_ns: when the process began recording


@dataclass
class Launch:
    """One launch: `id` (its run id, with `#k` where the id was reused), the run id and world of
    its headers, `source` (what `load_run` reads: for a folder of one launch, the folder as found)
    and when it began (the earliest `wall_ns` of its logs)."""

    id: str
    run: str
    world: int
    source: Source
    started_ns: int

    @property
    def logs(self) -> int:
        return len(self.source.found)


def find_launches(source: Source) -> list[Launch]:
    """The launches of what `discover` found, oldest first. Only a run directory is split; a log
    file, a list of files and Flight Recorder dumps are one launch. A folder of one launch is
    returned as found (the same Source, with the headers read: `Source.headers`), so that it
    reads exactly as before and its headers are read once. LogError (one line) for a log whose
    header cannot be read, as `load_run` says it."""
    logs, headers = _entries(source.logs)
    groups: dict[tuple, list[_Log]] = {}
    for log in logs:
        groups.setdefault((log.run, log.world), []).append(log)
    first = logs[0]
    if source.kind != RUN or (len(groups) == 1 and not _reused(logs)):
        source.headers = headers
        return [Launch(first.run, first.run, first.world, source, min(log.start for log in logs))]
    parts = []
    for members in groups.values():
        parts += _by_time(members) if _reused(members) else [members]
    parts.sort(key=lambda part: (min(log.start for log in part), part[0].path))
    return _named(parts)


def pick(launches: list[Launch], wanted: str, where: str) -> Launch:
    """The launch `wanted` names (its id, or a prefix of one id only); UsageError else."""
    exact = [launch for launch in launches if launch.id == wanted]
    found = exact or [launch for launch in launches if launch.id.startswith(wanted)]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"--launch {one_line(wanted)} names {len(found)} launches in {one_line(where)}: "
                         f"{id_list(found)}")
    raise UsageError(f"no launch {one_line(wanted)} in {one_line(where)}; its launches: {id_list(launches)}")


def newest(launches: list[Launch], where: str, command: str) -> Launch:
    """The launch that began last, said on stderr when there are several (what `tui` and `export`
    show without --launch)."""
    chosen = max(launches, key=lambda launch: launch.started_ns)
    if len(launches) > 1:
        print(f"collcheck {command}: {one_line(where)} holds {len(launches)} launches; using the newest, "
              f"{one_line(chosen.id)} (--launch ID picks another: {id_list(launches)})", file=sys.stderr)
    return chosen


def id_list(launches: list[Launch]) -> str:
    """The launches' ids, the first SHOWN_IDS of them."""
    ids = ", ".join(one_line(launch.id, 200) for launch in launches[:SHOWN_IDS])
    return ids + (f", ... ({len(launches) - SHOWN_IDS} more)" if len(launches) > SHOWN_IDS else "")


def _entries(paths: list[str]) -> tuple[list[_Log], list[dict] | None]:
    """Each log's fields, and the headers themselves while the logs read so far are one launch
    (None from the first log of another run id or world, or a repeated rank and restart: then
    only the few fields are kept)."""
    logs: list[_Log] = []
    headers: list[dict] | None = []
    keys: set[tuple[int, int]] = set()
    for path in paths:
        h = read_header(path)
        log = _Log(path, h["run"], h["world"], h["rank"], h.get("restart", 0), h.get("wall_ns", 0))
        logs.append(log)
        if headers is not None:
            key = (log.rank, log.restart)
            if (log.run, log.world) == (logs[0].run, logs[0].world) and key not in keys:
                headers.append(h)
                keys.add(key)
            else:
                headers, keys = None, set()
    return logs, headers


def _reused(logs: list[_Log]) -> bool:
    """Whether two of the logs are of one rank and restart."""
    return len({(log.rank, log.restart) for log in logs}) < len(logs)


class _Part:
    """A launch being gathered: its logs, their (rank, restart)s, and until when all its ranks
    were alive (the earliest last write)."""

    __slots__ = ("end", "keys", "logs")

    def __init__(self) -> None:
        self.logs: list[_Log] = []
        self.keys: set[tuple[int, int]] = set()
        self.end = float("inf")

    def add(self, log: _Log, end: float) -> None:
        self.logs.append(log)
        self.keys.add((log.rank, log.restart))
        self.end = min(self.end, end)


def _by_time(logs: list[_Log]) -> list[list[_Log]]:
    """The launches that one reused run id holds (see the module's docstring). A log's end is its
    file's last write; a time before its start (a copy that kept no times) is taken as unknown, and
    with every end unknown a log joins the newest launch without its rank. Only the newest
    MAX_ALIVE launches are looked at for each log: launches of one id run one after the other, or
    a few at once (a test runner's workers), and the work stays linear in the logs."""
    done: list[_Part] = []
    alive: list[_Part] = []  # newest last
    for log in sorted(logs, key=lambda log: (log.start, log.path)):
        done += [part for part in alive if part.end < log.start]
        alive = [part for part in alive if part.end >= log.start]
        part = next((p for p in reversed(alive) if (log.rank, log.restart) not in p.keys), None)
        if part is None:
            part = _Part()
            alive.append(part)
            if len(alive) > MAX_ALIVE:
                done.append(alive.pop(0))
        part.add(log, _last_write(log))
    return [part.logs for part in done + alive]


def _last_write(log: _Log) -> float:
    try:
        end = os.stat(log.path).st_mtime_ns
    except OSError:
        return float("inf")
    return end if end >= log.start else float("inf")


def _named(parts: list[list[_Log]]) -> list[Launch]:
    """A Launch per part (oldest first): its run id, with `#k` where the id holds several."""
    per_run: dict[str, int] = {}
    for part in parts:
        per_run[part[0].run] = per_run.get(part[0].run, 0) + 1
    seen: dict[str, int] = {}
    taken: set[str] = set()
    out = []
    for part in parts:
        run = part[0].run
        name = run
        if per_run[run] > 1:
            seen[run] = seen.get(run, 0) + 1
            name = f"{run}#{seen[run]}"
        while name in taken:  # a run id that itself ends in "#k"
            name += "#"
        taken.add(name)
        paths = sorted(log.path for log in part)
        folder = os.path.commonpath([os.path.dirname(p) for p in paths])
        out.append(Launch(name, run, part[0].world, Source(RUN, folder, paths), min(log.start for log in part)))
    return out
