"""Scan one rank's log into compact columns; runs in worker processes for big runs.

Only what the matcher needs is kept per event: a signature id, a group slot and the
byte offset of the record (about 14 bytes). Everything else (call site, label, times)
is decoded again from that offset when a report asks for the event (`RankLog.event`,
decode.LogFile); the statistics, which read the times of every event, ask the scan to keep
those too (`Times`: 22 bytes more an event). The loop that fills the columns is scanner.py's,
with the compiled one taking the usual collectives where it was built (fastscan.py).
"""

from __future__ import annotations

import functools
import os
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

from ..base import progress
from .reader import LogStream, parse_header, read_bytes, read_prefix
from .scanner import Scanner


@dataclass
class Times:
    """What the statistics read of every collective besides the matcher's columns, as decoding it
    again would give it (decode.LogFile.events): its issue time, the time of the first completion
    record read for it (its completion, else its return), its call site, whether it was async or
    native, and the tensors a collective of a shape-free signature was issued with."""

    issued: array = field(default_factory=lambda: array("q"))  # `ts` (µs since the log's origin; 0: none)
    done: array = field(default_factory=lambda: array("q"))  # the first completion's time, where `timed`
    timed: bytearray = field(default_factory=bytearray)  # 1: a completion record was read
    site: array = field(default_factory=lambda: array("i"))  # its position in Scan.sites; -1: none
    flags: bytearray = field(default_factory=bytearray)  # 1: async_op, 2: native
    tensors: dict = field(default_factory=dict)  # event -> its tensor spec's id (a shape-free op's), then the spec
    wide: bool = False  # a completion time out of int64's range: not kept (the events are decoded instead)

    def clear(self) -> None:
        for col in (self.issued, self.done, self.timed, self.site, self.flags):
            del col[:]
        self.tensors.clear()


@dataclass
class Scan:
    """What a worker sends back for one file (all picklable, mostly flat arrays)."""

    path: str
    header: dict
    size: int
    good_bytes: int
    torn: bool
    junk: str | None
    sig: array  # local signature id per event
    gid: array  # group slot per event
    off: array  # byte offset of each event's C record
    signatures: list  # local id -> Signature fields tuple (resolved strings)
    groups: list  # slot -> (name, ranks or None, desc)
    pending: set  # events with no completion record
    errors: dict  # event -> error text
    creations: list  # (op, name, ranks, site tuple or None, member, desc, ts)
    sites: list  # every call site defined in the file: (file, line, function)
    threads: list  # the names of the threads the file defines (T records), else ["MainThread"]
    exception: tuple | None = None  # (type, message, raise site (file, line, function) or None)
    trailer: bool = False
    disabled: str | None = None  # a Q record's message: recording stopped there
    stop_error: str | None = None  # its errno name when a write of the log failed (nothing follows it)
    watchdog: list = field(default_factory=list)
    partial: bool = False  # stopped at `limit` collectives: a preview of the file's beginning
    # all_to_all_single events (their signature ignores sizes): event -> (input rows, elements per
    # row, input split sizes, output split sizes), for analysis/splits.py
    a2a: dict = field(default_factory=dict)
    # events that returned but whose completion was never known (gloo P2P work has no future):
    # a wait() that later raised may have been waiting in them (analysis/hang.py)
    unconfirmed: list = field(default_factory=list)
    # calls torch skipped because this rank is not in the group: (api, site or None, ts)
    non_member: list = field(default_factory=list)
    # where the CPU thread waited for the stream (a backend with NCCL's semantics): (ts, site or
    # None, event id waited for or None, what: "item()", "barrier()", ...)
    syncs: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # [(ts, optimizer)] optimizer steps (O records)
    files: dict = field(default_factory=dict)  # a call site's file -> {"s": size, "m": mtime ns, "h": hash} (L records)
    sources: dict = field(default_factory=dict)  # event -> the global rank a receive from any source got it from
    # format 2: each event's `j` (its position among the group's collectives, or its P2P
    # channel's messages, as the recorder counted them); kept only when collectives were lost or
    # dropped (scan_bytes' second pass), else empty: positions are then what they were
    seq: array = field(default_factory=lambda: array("Q"))
    eid_runs: list = field(default_factory=lambda: [(0, 0)])  # (event index, event id) where ids jump
    damage: list = field(default_factory=list)  # [start byte, end byte, collectives lost or None]
    # records that do not match the schema (logfile/records.py), left out: damage start (or the offset of a
    # collective's frame, for one whose signature fields are wrong: also in `lost`) -> why
    malformed: dict = field(default_factory=dict)
    lost: list = field(default_factory=list)  # event ids of collectives unreadable (a record they need was lost)
    duplicates: int = 0  # frames skipped as copies of earlier ones
    colls_written: int = 0  # C records the writer had written by the last good frame (format 2)
    # a capped log whose oldest segments were deleted: collectives read before the gap are left
    # out (`dropped` of them), and the groups' counts at the first segment after it (`starts`:
    # group slot -> the `j` its next collective has) tell where each group goes on
    dropped: int = 0
    starts: dict = field(default_factory=dict)
    # each event's call chain, by a file-local key: a chain id (K record) >= 0, -2 - site id for a
    # call site alone (a chain of one frame), -1 none; `chain_sites` resolves every key used
    chain: array = field(default_factory=lambda: array("i"))
    chain_sites: dict = field(default_factory=dict)  # key -> ((file, line, function), ...) outermost first
    times: Times | None = None  # kept when asked (scan_bytes' `times`)
    # the whole log's tables (decode.Tables; not a partial scan's): what decoding one of its
    # collectives again needs, without reading the log through once more
    tables: object = None

    def event_of(self, eid: int) -> int | None:
        """The event index of an event id (None: not among the events read)."""
        k = bisect_right(self.eid_runs, eid, key=lambda r: r[1]) - 1
        if k < 0:
            return None
        n0, e0 = self.eid_runs[k]
        i = n0 + eid - e0
        end = self.eid_runs[k + 1][0] if k + 1 < len(self.eid_runs) else len(self.sig)
        return i if n0 <= i < end else None

    def eid_of(self, i: int) -> int:
        k = bisect_right(self.eid_runs, i, key=lambda r: r[0]) - 1
        n0, e0 = self.eid_runs[k]
        return e0 + i - n0


def _prefix(limit: int) -> int:
    """Bytes read first for a log's first `limit` collectives (records are ~50-100 bytes: usually enough)."""
    return 65536 + 160 * limit


def scan_file(path: str, limit: int | None = None, times: bool = False) -> Scan:
    """Scan a whole log, or only its first `limit` collectives (reading about that much of it)."""
    if limit is None:
        return scan_bytes(read_bytes(path), path, times=times)
    want = _prefix(limit)
    data = read_prefix(path, want)
    scan = scan_bytes(data, path, limit, times=times)
    if not scan.partial and len(data) == want:
        scan = scan_bytes(read_prefix(path, None), path, limit, times=times)  # it held fewer: read it all
    return scan


def scan_bytes(data: bytes, path: str, limit: int | None = None, keep_seq: bool = False, times: bool = False) -> Scan:
    """Columns of one log's bytes; with `limit`, stop after that many collectives (`partial`):
    their completions may lie beyond, so a partial scan reports none as pending. `times`: keep
    the statistics' columns too (`Times`).

    A record that needs a string, tensor spec or group whose record was lost to damage is
    left out (a collective: counted in `lost`); a lost call site only makes its site unknown."""
    header = parse_header(data, path)
    scan = Scan(path, header, len(data), 0, False, None, array("I"), array("H"), array("Q"), [], [], set(), {},
                [], [], [], times=Times() if times else None)
    stream = LogStream(data, path, expand_done=False, check_colls=False)
    scanner = Scanner(scan, keep_seq)
    scanner.read(stream, limit)
    if not keep_seq and (stream.damage or scan.lost or scan.dropped or len(scan.eid_runs) > 1):
        # collectives were lost or dropped: their recorded sequence numbers (`j`) place the rest;
        # read again to keep them (a clean log, the usual case, does without: 8 bytes an event)
        return scan_bytes(data, path, limit, keep_seq=True, times=times)
    scan.good_bytes = stream.good_bytes
    scan.torn, scan.junk, scan.damage = stream.torn, stream.junk, stream.damage
    scan.malformed.update(stream.malformed)
    scan.duplicates = stream.duplicates
    scan.colls_written = stream.colls if stream.framed else len(scan.sig)
    if not scan.partial:
        scan.pending.update(scanner.pending())
    tables = scanner.tables
    scan.tables = None if scan.partial else tables
    scan.sites = list(tables.sites.values())
    scan.chain_sites = tables.chain_sites(set(scan.chain))
    scan.groups = [tuple(g) for g in scanner.groups]
    scan.threads = list(tables.threads.values()) or ["MainThread"]
    if scan.times is not None:
        scanner.resolve_times(scan.times)
    return scan


WORTH_A_WORKER = 8 << 20  # bytes of logs from which a second process pays for its start and the results' transfer


def scan_many(paths: list[str], workers: int, limit: int | None = None, times: bool = False) -> list[Scan]:
    """Scan files, in `workers` processes when it pays off: many logs, or a few big ones (not for
    short previews)."""
    few = len(paths) < 8 or (limit is not None and limit * len(paths) < 2_000_000)
    alone = few and (len(paths) < 2 or _bytes_read(paths, limit) < WORTH_A_WORKER * len(paths))
    return in_workers(functools.partial(scan_file, limit=limit, times=times), paths, workers, "reading logs",
                      alone=alone)


def _bytes_read(paths: list[str], limit: int | None) -> int:
    return sum(_size(p) if limit is None else min(_size(p), _prefix(limit)) for p in paths)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0  # (reading it says what is wrong)


def in_workers(work, items: list, workers: int, what: str, alone: bool = False, size=None) -> list:
    """[work(item) for item in items], in `workers` forked processes unless `alone` (or one
    worker), in order; base/progress tells how far it is (`size`: how many things a result
    stands for, when items are batches of them)."""
    total = len(items) if size is None else sum(map(size, items))
    if workers <= 1 or alone:
        return list(progress.tracked(what, map(work, items), total, size))
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        done = pool.map(work, items, chunksize=max(1, len(items) // (workers * 8)))
        return list(progress.tracked(what, done, total, size))
