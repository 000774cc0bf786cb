"""Loading a run: find its logs, check they belong together, read each rank's columns.

In a healthy job thousands of ranks issue the same sequence on every group. Each log ends with
a checkpoint (logfile/checkpoint.py): every group's count and rolling hash, the collectives not
completed, those that raised. Ranks whose checkpoints and endings are the same are of one kind:
one of them is read in full, the others share its columns (`RankLog.like`) and keep what is
their own (header, path, error texts, exception message). A rank whose log has no usable
checkpoint at its end (killed before one was written, damaged, capped, format 1) is read in full.

A log whose header says `tail` holds only its header and its last checkpoint (live mode's answer
of a rank whose kind another rank sent whole: capture/live/share.py), and so does each of the
`ends` given (bytes in memory, no file): it is read as a rank of its kind, never in full; without
a log of its kind read in full it is left out, and the run says so.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

from ..base import collector, progress
from ..base.settings import Settings
from ..base.untrusted import one_line
from ..inputs.discover import Source, discover
from ..logfile import format as lf
from ..logfile.reader import (
    LogError,
    existing,
    read_ends,
    read_header,
    segment_paths,
    segmented,
)
from ..logfile.scan import Scan, in_workers, scan_many
from ..logfile.summaries import compiled_summaries, read_summaries
from ..logfile.tail import TAIL_READS, Tail, read_end, read_tail
from .liveness import process_alive
from .ranks import rank_ranges
from .run import RankLog, Run, Signature

FOLD_FROM = 8  # ranks from which loading compares checkpoints before reading logs


def load_run(target: str | list[str] | Source, workers: int | None = None, preview: int | None = None,
             running=None, times: bool = False, known: dict | None = None, ends: dict | None = None) -> Run:
    """Load a run directory (or a log file, a list of log files, Flight Recorder dumps: what
    inputs.discover finds for `target`, or found) and check that they belong together; the
    cycle collector paused meanwhile (base/collector.py).

    `preview`: read only each rank's first `preview` collectives (fast first screen of a
    huge run in the TUI); the logs' ends are then unknown (`RankLog.partial`). `running`: the
    ranks whose processes still run (the live checker knows); by default, those of this host
    whose process is alive (liveness.py). `times`: the times of the collectives of each log read
    in full kept too (`RankLog.times`), for the statistics. `known`: path -> (header, Tail or
    None), what another process read of the logs' ends already (the TUI's loader): used as read,
    and what is read here is added to it. `ends`: rank -> the end of a log (its header and
    checkpoint, as bytes: live mode's snapshot), ranks of the run known only so."""
    with collector.paused():
        return _load_run(target, workers, preview, running, times, known, ends)


def _load_run(target: str | list[str] | Source, workers: int | None, preview: int | None, running,
              times: bool = False, known: dict | None = None, ends: dict | None = None) -> Run:
    source = target if isinstance(target, Source) else discover(target)
    paths = source.logs  # (Flight Recorder dumps: converted to logs once)
    run = Run(source.path if source.path is not None else os.path.commonpath(paths))
    if workers is None:
        workers = Settings.from_env().check("COLLCHECK_WORKERS").workers or (os.cpu_count() or 1)
    fold = preview is None and len(paths) >= FOLD_FROM
    summaries = _summaries(paths, workers, fold, source.headers, known)
    if preview is None and not fold and (ends or any(h.get("tail") for h, _ in summaries)):  # (ends: by kinds)
        summaries = [s if s[1] is not None else _summary(p, True, s[0]) for p, s in zip(paths, summaries)]
    if ends:
        more = _ends(run.directory, ends, run)
        paths, summaries = paths + [p for p, _ in more], summaries + [s for _, s in more]
    headers = [h for h, _ in summaries]
    kept = _same_run(paths, headers)
    if len(kept) < len(paths):
        keep = set(kept)
        summaries = [s for p, s in zip(paths, summaries) if p in keep]
        paths, headers = kept, [h for h, _ in summaries]
    run.source = headers[0].get("source", "collcheck")
    # converted Flight Recorder dumps: what they could not support (each note once)
    run.warnings += dict.fromkeys(n for h in headers for n in h.get("notes", ()) if isinstance(n, str))
    run.unchecked += dict.fromkeys(n for h in headers for n in h.get("unchecked", ()) if isinstance(n, str))
    kinds, unread = _kinds(paths, summaries)
    if unread:
        run.unchecked.append(f"rank(s) {rank_ranges(unread)}: only the end of the log came (its checkpoint), and no "
                             "log of the same kind came whole: not read")
    read = [members[0][0] for members in kinds]
    dumps = existing([p[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX for p in paths])  # (one listing, not one look a log)
    for scan, members in zip(scan_many(read, workers, preview, times), kinds):
        sig_map = [run.sig_id(Signature(*t)) for t in scan.signatures]
        first = RankLog(run, scan, sig_map, dump=_dump_of(scan.path, dumps))
        kind = first.kind_state() if len(members) > 1 else None
        _add(run, first, running)
        for path, header, tail in members[1:]:
            log = RankLog.of_kind(kind, scan, path, header, *_own(scan, tail), dump=_dump_of(path, dumps))
            _add(run, log, running)
    run.world = headers[0]["world"]
    missing = sorted(set(range(run.world)) - set(run.ranks) - set(unread))  # (those said above)
    if missing:
        run.unchecked.append(
            f"no Flight Recorder dump for rank(s) {rank_ranges(missing)} (a process killed before it could dump, "
            "e.g. aborted by one of gloo's size checks): what they issued is not known and was not compared"
            if run.source == "flight-recorder" else
            f"no log for rank(s) {rank_ranges(missing)}: they never reached init_process_group or their logs are missing")
    run.unchecked += stopped_notes(run)
    run.warnings += run.unchecked
    return run


def stopped_ranks(run) -> list[tuple[list[int], str]]:
    """[(ranks, why)]: the ranks whose logs say recording stopped (a full disk...), by reason."""
    by_why: dict[str, list[int]] = {}
    for r in sorted(run.ranks) if run is not None else ():
        why = run.ranks[r].stopped
        if why is not None:
            by_why.setdefault(why, []).append(r)
    return [(ranks, why) for why, ranks in by_why.items()]


def stopped_notes(run: Run) -> list[str]:
    """One line per reason recording stopped with the ranks it stopped on: what they did after
    their last record is not known, so the run cannot be called clean."""
    notes = []
    for ranks, why in stopped_ranks(run):
        counts = sorted({len(run.ranks[r]) for r in ranks})
        n = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        one = len(ranks) == 1
        notes.append(f"rank{'' if one else 's'} {rank_ranges(ranks)}: recording stopped after {n} collectives "
                     f"({one_line(why, 300)}): what {'it' if one else 'they'} did after that is not known and was "
                     "not checked")
    return notes


def reads_by_kinds(paths: list[str], sample: int = 8) -> bool:
    """Whether a run's logs look like they will be read by kinds (`load_run`): enough of them, and
    the first `sample` end with a checkpoint that stands for the whole log. A guess for a view
    deciding whether a preview is worth it; load_run decides log by log."""
    if len(paths) < max(FOLD_FROM, 64):
        return False
    return all(_summary(p, True)[1] is not None for p in paths[:sample])


def _add(run: Run, log: RankLog, running) -> RankLog:
    if not log.trailer and run.source == "collcheck":
        log.running = log.rank in running if running is not None else process_alive(log.header)
    run.ranks[log.rank] = log
    run.warnings += log.damage_notes()
    return log


def _summary(path: str, fold: bool, header: dict | None = None, capped: set | None = None,
             read: tuple | None = None) -> tuple[dict, Tail | None]:
    """A log's header (read unless given), and its last checkpoint when it can stand for the
    whole log; folding, both from one open of the file (its first and last bytes). `capped`: the
    logs with later segments, when known (reader.segmented: one look at the directory). `read`:
    what the compiled pass read of it (logfile/summaries.py: its bytes, and its header and tail
    where they were usual), taken as read."""
    ends, usual, tail = read if read is not None else (read_ends(path, TAIL_READS[0]) if fold else None, None, None)
    if header is None:
        header = usual if usual is not None else read_header(path, ends[0] if ends is not None else None)
    if not fold or header.get("v", 1) < 2 or (path in capped if capped is not None else segment_paths(path)):
        return header, None
    if tail is None:
        tail = read_tail(path, ends[1:] if ends is not None else None)
    return header, tail if tail is not None and tail.complete else None


def _read(items: list, fold: bool, capped: set | None) -> list:
    """`_summary` of each (path, header): from the compiled pass, where there is one."""
    read = read_summaries([path for path, _ in items]) if fold else None
    if read is None:
        return [_summary(path, fold, header, capped) for path, header in items]
    return [_summary(path, fold, header, capped, r) for (path, header), r in zip(items, read)]


def _summaries(paths: list[str], workers: int, fold: bool, headers: list | None,
               known: dict | None = None) -> list[tuple[dict, Tail | None]]:
    """`_summary` of every log (`headers`: theirs, when inputs/launches.py read them already), for
    thousands of them in threads (the compiled pass) or else in `workers` processes; those in
    `known` taken from it (and the others added to it)."""
    if headers is not None and not fold:
        return [(h, None) for h in headers]
    if known is not None and fold:
        todo = [k for k, p in enumerate(paths) if p not in known]
        if todo:
            read = _summaries([paths[k] for k in todo], workers, fold, [headers[k] for k in todo] if headers else None)
            known.update(zip([paths[k] for k in todo], read))
        return [known[p] for p in paths]
    items = list(zip(paths, headers or [None] * len(paths)))
    if len(items) < PARALLEL_FROM:
        return _read(items, fold, segmented(paths) if fold else None)
    chunks = [items[k:k + CHUNK] for k in range(0, len(items), CHUNK)]
    if fold and compiled_summaries():  # (threads: the pass reads and checks without the GIL; no process
        # to start, no summaries pickled back: what cost most of the processes' time)
        read = functools.partial(_read, fold=fold, capped=segmented(paths))
        with ThreadPoolExecutor(READERS) as pool:
            done = progress.tracked("reading checkpoints", pool.map(read, chunks), len(items), len)
            return [summary for chunk in done for summary in chunk]
    done = in_workers(functools.partial(_chunk_summaries, fold=fold), chunks, workers, "reading checkpoints", size=len)
    return [summary for chunk in done for summary in chunk]


def _ends(folder: str, ends: dict, run: Run) -> list[tuple[str, tuple]]:
    """[(a name for it, (header, Tail or None))] of each log known by its end only (bytes): named
    as its file would be in `folder` (there is none). One that is no log's end of its rank is
    left out, and the run says so."""
    out, bad, seen = [], [], {}
    for rank, data in sorted(ends.items()):
        path = os.path.join(folder, f"rank-{rank:05d}.end{lf.LOG_SUFFIX}")
        try:
            header, tail = read_end(data, path, seen)
        except LogError:
            header = tail = None
        if header is None or header["rank"] != rank or header.get("v", 1) < 2:
            bad.append(rank)
            continue
        out.append((path, ({**header, "tail": 1}, tail if tail is not None and tail.complete else None)))
    if bad:
        run.unchecked.append(f"rank(s) {rank_ranges(bad)}: what came as the end of the log was not one: not read")
    return out


PARALLEL_FROM = 2048  # logs from which their summaries are read in threads (the compiled pass) or processes
CHUNK = 256  # logs whose ends one worker process (the compiled pass: one thread) reads at once, READERS at a time (I/O overlaps)
READERS = 8


def _chunk_summaries(items: list, fold: bool) -> list:
    """The chunk's summaries, READERS threads each reading every READERS-th log (a task per log
    would cost the pool about as much as the read)."""
    capped = segmented([path for path, _ in items]) if fold else None

    def read(k: int) -> list:
        return _read(items[k::READERS], fold, capped)

    with ThreadPoolExecutor(READERS) as pool:
        parts = list(pool.map(read, range(READERS)))
    out = [None] * len(items)
    for k, part in enumerate(parts):
        out[k::READERS] = part
    return out


def _kinds(paths: list[str], summaries: list) -> tuple[list[list[tuple]], list[int]]:
    """The logs grouped by kind, each group [(path, header, tail), ...] with the one read in full
    first; a log without a usable checkpoint is a kind of its own. And the ranks of the logs
    that hold only their end (`tail`) with no log of their kind to read in full: left out."""
    kinds: dict[object, list] = {}
    for n, (path, (header, tail)) in enumerate(zip(paths, summaries)):
        key = (tail.key(), header.get("restart", 0), header.get("backend"), header.get("seg", 0)) \
            if tail is not None else n
        kinds.setdefault(key, []).append((path, header, tail))
    out, unread = [], []
    for members in kinds.values():
        members.sort(key=lambda m: bool(m[1].get("tail")))  # (stable: a whole log first)
        if members[0][1].get("tail"):
            unread += [m[1]["rank"] for m in members]
        else:
            out.append(members)
    return out, sorted(unread)


def _own(scan: Scan, tail: Tail) -> tuple[dict, tuple | None]:
    """(error texts, exception) of a log of `scan`'s kind: its kind's, with this log's own texts
    and message (the tail's records; the kind fixed which collectives raised)."""
    errors = dict(scan.errors)
    exception = scan.exception
    for rec in tail.after:
        kind = rec.get("k")
        if kind == lf.DONE and isinstance(rec.get("e"), str):
            i = scan.event_of(rec.get("i", -1))
            if i is not None:
                errors[i] = rec["e"]
        elif kind == lf.EXCEPTION and exception is not None:
            message = rec.get("m")
            exception = (exception[0], message if isinstance(message, str) else "", exception[2])
    return errors, exception


def _dump_of(path: str, dumps: set[str]) -> bool:
    """Whether a SIGTERM dump may lie beside the log at `path` (`dumps`: those that may)."""
    return path[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX in dumps


def _same_run(paths: list[str], headers: list[dict]) -> list[str]:
    """Refuse logs of different runs; keep only the latest restart of each rank."""
    first = headers[0]
    for path, h in zip(paths[1:], headers[1:]):
        if h["run"] != first["run"] or h["world"] != first["world"]:
            raise LogError(
                f"logs of different runs mixed: {one_line(paths[0])} (run {one_line(first['run'])}, world {first['world']}) "
                f"and {one_line(path)} (run {one_line(h['run'])}, world {h['world']}); pass one run directory"
            )
    seen: dict[tuple, str] = {}
    for path, h in zip(paths, headers):
        key = (h["rank"], h.get("restart", 0))
        if key in seen:
            raise LogError(
                f"two logs for rank {key[0]} (restart {key[1]}): {one_line(seen[key])} and {one_line(path)}; "
                "logs of several launches are mixed in one directory"
            )
        seen[key] = path
    latest = max(h.get("restart", 0) for h in headers)
    return [p for p, h in zip(paths, headers) if h.get("restart", 0) == latest]
