"""Append-only log of one rank: one frame per collective (one write(2), or on the compiled path one
copy into a shared mapping of the file), strings interned.

Durability rule (docs/log-format.md): the record of a collective reaches the OS
before the collective is issued, so it survives SIGKILL/SIGABRT of a rank that is
blocked inside it (the page cache outlives the process). Small follow-up records
(return/completion times) are queued and ride along with the next write, or are
flushed by the watchdog thread within a fraction of a second.

Bounded logs (COLLCHECK_MAX_MB): the log is written as segments, the first file and then
`<file>.1`, `<file>.2`, ...; each later segment starts with the header and a snapshot of
every string, site, tensor spec, thread and group record written so far and the recorder's
counters, so it reads on its own. When the segments pass the cap the oldest are deleted, never
the first file (its header and first group creations).

A full disk (or quota, a file size limit, an I/O error) never goes unsaid: space is allocated
ahead of the records, always RESERVE bytes more than they need (space.py), so when no more can
be had the writer still has room for one last frame, a `Q` record saying why recording stopped
(`stop`); nothing is written after it. A log cut by the disk then reads as "recording stopped",
not as a rank killed inside its last collective.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading

import msgpack

from . import format as lf
from .checkpoint import group_entry, vocabulary
from .records import chain_record, site_record, stop_record, string_record, tspec_record
from .space import RESERVE, Counters, allocate, error_name

_pack = msgpack.Packer(use_bin_type=True).pack  # not thread-safe: only used under the lock
SEGMENTS = 8  # a capped log is kept as about this many segments
MIN_SEGMENT = 16 * 1024


MAX_FILES = 256  # call-site files fingerprinted per log (a program's own and the frameworks' it calls)
MAX_HASH_BYTES = 4 << 20  # a file hashed at exit at most (as large as lint reads)


def file_hash(data: bytes) -> str:
    """The content hash an L record keeps, and the analysis computes of its copy of the file."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def open_exclusive(directory: str, base: str) -> tuple[int, str]:
    """Create a new log file that no other process is using (restarts, forks, reruns)."""
    os.makedirs(directory, exist_ok=True)
    # read access too: the compiled path maps the file (a shared mapping needs it)
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    for name in _candidates(base):
        path = os.path.join(directory, name + lf.LOG_SUFFIX)
        try:
            return os.open(path, flags, 0o644), path
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, f"no free log file name for {base} in {directory}")


def _candidates(base: str):
    """The names open_exclusive tries, in order (made as tried: the first is almost always free)."""
    yield base
    pid = os.getpid()
    yield f"{base}.{pid}"
    for i in range(1, 100):
        yield f"{base}.{pid}.{i}"


class LogWriter:
    """Owns one rank's file descriptor and its intern tables. All methods are thread-safe."""

    def __init__(self, fd: int, path: str, lock=None, max_bytes: int = 0):
        self.path = path
        # the compiled fast path's WriterLock when it is loaded: it writes records itself under it
        self.lock = threading.Lock() if lock is None else lock
        self.counters = lock if hasattr(lock, "segment_bytes") else Counters()
        self.counters.fd = fd
        self.counters.written = 0
        self.max_bytes = max_bytes
        self.counters.segment_bytes = max(max_bytes // SEGMENTS, MIN_SEGMENT) if max_bytes > 0 else 0
        self.header: dict | None = None
        self.segment = 0
        self._segments: list[tuple[str, int]] = []  # (path, size) of closed later segments on disk
        self._first_size = 0
        self._kept: list[bytes] = []  # records every new segment repeats (interned tables, groups)
        self.snapshot_records = lambda: []  # the recorder's counters for a new segment (J records)
        self._pending: list[bytes] = []
        self._done: list[tuple] = []  # (event id, returned, completed or None) not written yet
        self._strings: dict[str, int] = {}
        self._sites: dict[tuple, int] = {}
        self._chains: dict[tuple, int] = {}
        self._tspecs: dict[tuple, int] = {}
        self._files: dict[int, str] = {}  # string id -> a call site's file seen (L records)
        self._groups = hashlib.blake2b(digest_size=8)  # every group record's lasting fields (vocabulary)
        self.closed = False
        # why recording stopped (a write failed: ENOSPC, EDQUOT, EFBIG, EIO...): its Q record is
        # the file's last; None while it records
        self.stopped: str | None = None
        self.on_stop = lambda why: None  # the recorder's: say it once, stop recording (writer lock held)
        self.clock = None  # () -> µs on the log's clock, for the stop record's `ts` (the recorder's)
        self.colls = 0  # C records written so far (the frame field), when the caller passes eids
        # how many C records have been written, for frames without one; the compiled path,
        # which writes C records itself, replaces it with its own counter
        self.colls_written = lambda: self.colls

    # -- interning (call with self.lock held) -------------------------------------
    def string_id(self, s: str) -> int:
        i = self._strings.get(s)
        if i is None:
            i = self._strings[s] = len(self._strings)
            self.keep(string_record(i, s))
        return i

    def site_id(self, filename: str, line: int, func: str) -> int:
        key = (filename, line, func)
        i = self._sites.get(key)
        if i is None:
            f, n = self.string_id(filename), self.string_id(func)
            i = self._sites[key] = len(self._sites)
            self.keep(site_record(i, f, line, n))
            if f not in self._files and filename.endswith(".py"):
                self._file_seen(filename, f)
        return i

    def _file_seen(self, filename: str, sid: int) -> None:
        """An L record for a call site's file, first seen: its size and mtime now (once per file:
        what the analysis compares with the source it reads, to blame from the program)."""
        self._files[sid] = filename
        if len(self._files) > MAX_FILES:
            return
        try:
            st = os.stat(filename)
        except (OSError, ValueError):
            return
        self.keep({"k": lf.FILE, "f": sid, "s": st.st_size, "m": st.st_mtime_ns})

    def file_hashes(self, select) -> None:
        """At exit: an L record with the content hash of each file seen that `select(path)` keeps
        (the program's own), read now (off the collectives' path; at most MAX_HASHED files of at
        most MAX_HASH_BYTES): a checkout on another machine is recognised by it."""
        for sid, path in list(self._files.items())[:MAX_FILES]:
            if not select(path):
                continue
            try:
                with open(path, "rb") as fh:
                    data = fh.read(MAX_HASH_BYTES + 1)
            except (OSError, ValueError):
                continue
            if len(data) <= MAX_HASH_BYTES:
                self.queue({"k": lf.FILE, "f": sid, "h": file_hash(data)})

    def chain_id(self, sites: tuple) -> int:
        """sites: the site ids of the user's frames, outermost first."""
        i = self._chains.get(sites)
        if i is None:
            i = self._chains[sites] = len(self._chains)
            self.keep(chain_record(i, list(sites)))
        return i

    def tspec_id(self, key: tuple) -> int:
        """key: tuple of (dtype str, shape tuple) for the tensors that ranks must agree on."""
        i = self._tspecs.get(key)
        if i is None:
            spec = [[self.string_id(d), list(s)] for d, s in key]
            i = self._tspecs[key] = len(self._tspecs)
            self.keep(tspec_record(i, spec))
        return i

    def vocabulary(self) -> int:
        """checkpoint.vocabulary of what this log interned and its groups (lock held)."""
        sites = {i: key for key, i in self._sites.items()}
        chains = [tuple(sites.get(i) for i in chain) for chain in self._chains]
        return vocabulary(self._strings, self._sites, chains, self._groups.digest())

    def _note_group(self, record: dict) -> None:
        """A group record goes into the groups' hash, in order, without its times and site."""
        self._groups.update(group_entry(record))

    # -- output (call with self.lock held) ----------------------------------------
    @property
    def fd(self) -> int:
        return self.counters.fd

    def queue(self, record: dict) -> None:
        if record.get("k") == lf.GROUP:
            self._note_group(record)
        self._pending.append(_pack(record))

    def keep(self, record: dict) -> None:
        """Queue a record that every later segment repeats (threads, groups, interned tables)."""
        if record.get("k") == lf.GROUP:
            self._note_group(record)
        b = _pack(record)
        self._pending.append(b)
        if self.counters.segment_bytes:
            self._kept.append(b)

    def done(self, eid: int, returned: int, completed: int | None) -> None:
        """A collective returned (and completed): written with the next C record, or as a D record."""
        self._done.append((eid, returned, completed))

    def write(self, record: dict | None = None, eid: int | None = None) -> None:
        """Write queued records plus `record` in one frame, one write(2) call; `eid`: the event id
        of `record` when it is a C record (the frame carries the count of C records before it).
        Completions ride in a C record (`d`: [event id back, µs before it returned, µs before it
        completed]), else go out as D records."""
        kind = record.get("k") if record is not None else None
        if kind == lf.HEADER:
            self.header = record
        elif kind == lf.GROUP:
            self._note_group(record)
        if eid is None and kind == lf.COLL:
            eid = self.colls_written()
        if self._done:
            if kind == lf.COLL:
                ts = record["ts"]
                record["d"] = [[eid - e, ts - r] if c is None else [eid - e, ts - r, ts - c] for e, r, c in self._done]
            else:
                self._pending += [_pack({"k": lf.DONE, "i": e, "r": r} if c is None else
                                        {"k": lf.DONE, "i": e, "r": r, "c": c}) for e, r, c in self._done]
            self._done.clear()
        if record is not None:
            self._pending.append(_pack(record))
        if not self._pending or self.closed:
            return
        if eid is None:
            before = self.colls_written()
        else:
            before, self.colls = eid, eid + 1
        data = lf.frame(b"".join(self._pending), before)
        self._pending.clear()
        self._write_all(data)
        c = self.counters
        if c.segment_bytes and c.written >= c.segment_bytes:
            self.next_segment()

    def _write_all(self, data: bytes) -> None:
        if self.stopped is not None:
            return
        try:
            self.counters.append(data)
        except OSError as exc:
            self.stop(exc, data)

    def stop(self, exc: OSError, unwritten: bytes = b"") -> None:
        """A write failed (or its room could not be allocated): write the Q record that says so
        into the room kept for it (after `unwritten`, the frame that failed, when both fit), write
        nothing after it, and tell the recorder (writer lock held; the compiled path's failed
        writes come here through Recorder.fail)."""
        if self.stopped is not None or self.closed:
            return
        why = exc.strerror or str(exc) or type(exc).__name__
        name = error_name(exc)
        self.stopped = f"{why} ({name})" if name else why
        if hasattr(self.lock, "closed"):
            self.lock.closed = True  # the compiled path writes nothing more either
        last = lf.frame(_pack(stop_record(f"could not write the log: {why}", name, self.clock() if self.clock else None)),
                        self.colls_written())
        if self.counters.written == 0 and not unwritten and self.header is not None:  # (a segment's first frame)
            last = lf.frame(_pack(dict(self.header, seg=self.segment) if self.segment else self.header), 0) + last
        tries = [unwritten + last, last] if unwritten and len(unwritten) + len(last) <= RESERVE else [last]
        self._pending.clear()
        self._done.clear()
        for data in tries:
            try:
                self.counters.append_reserved(data)
                break
            except OSError:
                pass  # no room at all (a file system that cannot allocate ahead): the log ends as it is
        if self.counters.written == 0:  # not even its header: no log rather than one no reader takes
            try:
                os.unlink(self._segment_path(self.segment) if self.segment else self.path)
            except OSError:
                pass
        self.on_stop(self.stopped)

    def next_segment(self) -> None:
        """Go on in a new segment file that reads on its own; delete the oldest segments (never
        the first file) while the log is over its cap. Writer lock held; the compiled path calls
        it too, after its own write. A new file that cannot be made or hold its first frame
        leaves the stop record in the current one."""
        c = self.counters
        if self.header is None or self.closed or self.stopped is not None:
            return
        path = self._segment_path(self.segment + 1)
        snapshot = [_pack(dict(self.header, seg=self.segment + 1))] + self._kept
        snapshot += [_pack(r) for r in self.snapshot_records()]
        first = lf.frame(b"".join(snapshot), self.colls_written())
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(path, flags, 0o644)
            try:
                allocate(fd, len(first) + RESERVE)
            except OSError:
                os.close(fd)
                os.unlink(path)
                raise
        except OSError as exc:
            self.stop(exc)
            return
        if self.segment == 0:
            self._first_size = c.written
        else:
            self._segments.append((self._segment_path(self.segment), c.written))
        self.segment += 1
        c.trim()
        os.close(c.fd)
        c.fd, c.written = fd, 0
        self._write_all(first)
        total = self._first_size + sum(size for _, size in self._segments) + c.written
        while self._segments and total > self.max_bytes:
            old, size = self._segments.pop(0)
            try:
                os.unlink(old)
            except OSError:
                pass
            total -= size

    def _segment_path(self, n: int) -> str:
        return f"{self.path}.{n}"

    def parts(self) -> list[tuple[str, int, int]]:
        """The log's files as written so far, in order, as (path, segment number, bytes): the first
        file, the later segments still on disk, the current one (writer lock held). Sizes are
        what was written: on the compiled path a file may be longer (its mapping, until trimmed).
        Live mode publishes them (capture/live/share.py)."""
        c = self.counters
        current = getattr(c, "origin", 0) + c.written  # (the pure-Python path appends past `origin`)
        if self.segment == 0:
            return [(self.path, 0, current)]
        later = [(path, int(path.rpartition(".")[2]), size) for path, size in self._segments]
        return [(self.path, 0, self._first_size), *later, (self._segment_path(self.segment), self.segment, c.written)]

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.write()
                self.closed = True
                if hasattr(self.lock, "closed"):
                    self.lock.closed = True  # what the compiled path checks
                try:
                    self.counters.trim()
                finally:
                    os.close(self.counters.fd)
