"""Read one rank's log: every complete record, the torn tail, and clear errors for bad files.

Log files are data from other machines: they are decoded with msgpack only (no pickle, no eval),
with limits on container and string sizes, and checked against the schema (logfile/records.py). Only
regular files are read (a FIFO would block, a device never ends), and only up to a size
(MAX_LOG_BYTES), checked before reading.
"""

from __future__ import annotations

import functools
import os
import stat
import time
from dataclasses import dataclass, field

import msgpack

from ..base.errors import LogError  # noqa: F401  (raised here; callers name it from this module too)
from ..base.untrusted import one_line
from . import format as lf
from .frames import CRC_BUDGET, READ_ERRORS, frame_at, malformed, read_frames
from .records import MAX_WORLD, coll_problem, known_header, problem

MAX_LOG_BYTES = 1 << 31  # a log (its first file and segments together): ~40M collectives, held in memory
MAX_HEADER = 1 << 20  # bytes read to find a header (a real one is a few hundred)
HEAD = 1 << 12  # bytes read first to find a header
SETTLED_NS = 2 * 10**9  # a directory unchanged this long: its listing stands (may_exist)


def shown(path: str) -> str:
    """A path (named by a log's writer, or a tarball) as it can be printed."""
    return one_line(path)


@dataclass
class RawLog:
    path: str
    header: dict
    records: list[dict] = field(default_factory=list)
    size: int = 0
    good_bytes: int = 0  # offset after the last good record
    torn: bool = False  # bytes after the last complete record (crash while writing)
    junk: str | None = None  # why reading stopped early, if not a torn tail (format 1)
    damage: list = field(default_factory=list)  # [start, end, collectives lost or None] (format 2)


_MAX = 64 * 1024 * 1024


def read_log(path: str) -> RawLog:
    return parse_log(read_bytes(path), path)


@functools.lru_cache(maxsize=64)
def _segments_in(directory: str, mtime_ns: int) -> dict[str, list[str]]:
    """A directory's segment files by the log they continue (`<log>.<n>`), in order: one listing
    for every log of a run (a run directory holds thousands)."""
    found: dict[str, list[tuple[int, str]]] = {}
    for n in os.listdir(directory):
        base, dot, number = n.rpartition(".")
        if dot and number.isascii() and number.isdigit() and len(number) < 10:
            found.setdefault(base, []).append((int(number), n))
    return {base: [n for _, n in sorted(segs)] for base, segs in found.items()}


@functools.lru_cache(maxsize=64)
def _names_in(directory: str, mtime_ns: int) -> frozenset:
    return frozenset(os.listdir(directory))


def may_exist(path: str) -> bool:
    """False when `path` is surely not there: not in its directory's listing (one listing for the
    thousands of logs of a run directory). A directory changed in the last SETTLED_NS may have
    changed again within its clock's tick, unseen: then the path itself is looked at."""
    directory, base = os.path.split(path)
    directory = directory or "."
    try:
        mtime = os.stat(directory).st_mtime_ns
        if time.time_ns() - mtime > SETTLED_NS:
            return base in _names_in(directory, mtime)
        return os.path.lexists(path)
    except OSError:
        return True  # (not known: the caller looks)


def existing(paths: list[str]) -> set[str]:
    """The paths of `paths` that may exist (`may_exist` of each), with one look at each directory
    instead of one per path: thousands of ranks ask whether a dump lies beside their log."""
    out: set[str] = set()
    for directory, items in _by_directory(paths).items():
        try:
            mtime = os.stat(directory).st_mtime_ns
            names = _names_in(directory, mtime) if time.time_ns() - mtime > SETTLED_NS else None
        except OSError:
            out.update(path for path, _ in items)  # (not known: the caller looks)
            continue
        out.update(path for path, base in items if (base in names if names is not None else os.path.lexists(path)))
    return out


def _by_directory(paths: list[str]) -> dict[str, list[tuple[str, str]]]:
    """directory -> [(path, its name)] of the paths in it (os.path.split's; a path in the same
    directory as the one before is split by its length: a run's thousands of logs)."""
    by_dir: dict[str, list[tuple[str, str]]] = {}
    prefix, items, sep, alt = None, [], os.sep, os.altsep or os.sep
    for path in paths:
        if prefix is not None and path.startswith(prefix):
            base = path[len(prefix):]
            if base and sep not in base and alt not in base:
                items.append((path, base))
                continue
        directory, base = os.path.split(path)
        items = by_dir.setdefault(directory or ".", [])
        items.append((path, base))
        prefix = directory + sep if directory and not directory.endswith((sep, alt)) else None
    return by_dir


def segment_paths(path: str) -> list[str]:
    """The later segments of a capped log (`<path>.1`, `<path>.2`, ...: the oldest may have been
    deleted), in order."""
    directory, base = os.path.split(path)
    directory = directory or "."
    try:
        segments = _segments_in(directory, os.stat(directory).st_mtime_ns)
    except OSError:
        return []
    return [os.path.join(directory, n) for n in segments.get(base, ())]


def segmented(paths: list[str]) -> set[str]:
    """The paths of `paths` that have later segments (`segment_paths` not empty), with one look at
    each directory instead of one per log."""
    out: set[str] = set()
    for directory, items in _by_directory(paths).items():
        try:
            segments = _segments_in(directory, os.stat(directory).st_mtime_ns)
        except OSError:
            continue
        out.update(path for path, base in items if base in segments)
    return out


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words (for the one-line refusal)."""
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return what
    return "not a regular file"


def _read_regular(path: str, most: int | None = None, budget: int = MAX_LOG_BYTES) -> bytes:
    """A regular file's bytes (its first `most`), refused when it is something else (a FIFO
    would block, a device never ends) or larger than `budget` bytes, before anything is read."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # (follows a symlink: what it points to)
            raise LogError(f"{shown(path)}: {file_kind(os.stat(path).st_mode)}, not a log file")
        # O_NONBLOCK: a FIFO put there after the check does not block the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise LogError(f"{shown(path)}: no such file") from None
    except OSError as exc:
        raise LogError(f"{shown(path)}: cannot read: {exc.strerror}") from None
    with open(fd, "rb", closefd=True) as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LogError(f"{shown(path)}: {file_kind(info.st_mode)}, not a log file")
        size = info.st_size if most is None else min(info.st_size, most)
        if size > budget:
            raise LogError(f"{shown(path)}: {info.st_size:,} bytes: larger than the {MAX_LOG_BYTES >> 30} GiB "
                           "a log may be (not a collcheck log?)")
        try:
            return f.read(size)  # what is there now (a live log grows)
        except OSError as exc:
            raise LogError(f"{shown(path)}: cannot read: {exc.strerror}") from None


def read_bytes(path: str) -> bytes:
    """A log's bytes: its first file and its later segments, one stream of frames."""
    if os.path.isdir(path):
        raise LogError(f"{shown(path)}: is a directory, not a log file")
    data = _read_regular(path)
    for seg in segment_paths(path):
        try:
            data += _read_regular(seg, budget=MAX_LOG_BYTES - len(data))
        except LogError:
            if os.path.lexists(seg):
                raise
            continue  # deleted by the writer meanwhile (a live run)
    return data


def read_prefix(path: str, size: int | None) -> bytes:
    """The first `size` bytes of a log's first file (a preview; a header); None: all of it."""
    return _read_regular(path, size)


def read_text(path: str, most: int = 1 << 22) -> str | None:
    """A text file beside a log (the stacks faulthandler dumped), its first `most` bytes; None when
    there is none, or it is not a regular file."""
    try:
        return _read_regular(path, most).decode(errors="replace")
    except LogError:
        return None


def unpacker_for(data, use_list: bool = False) -> msgpack.Unpacker:
    """A bounded msgpack decoder over `data` (never pickle, never eval)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=use_list,
                                max_buffer_size=max(len(data), 1), max_str_len=_MAX, max_bin_len=_MAX,
                                max_array_len=_MAX, max_map_len=_MAX)
    unpacker.feed(data)
    return unpacker


def check_header(header, path: str) -> dict:
    """The header as the schema has it (logfile/records.py), with nothing but the keys it knows; a LogError
    (one line) when it is not a collcheck header, or one of an impossible world."""
    if not isinstance(header, dict) or header.get("k") != lf.HEADER or header.get("magic") != lf.MAGIC:
        raise LogError(f"{shown(path)}: not a collcheck log (bad magic)")
    version = header.get("v")
    if not isinstance(version, int) or version > lf.FORMAT_VERSION:
        raise LogError(
            f"{shown(path)}: log format version {one_line(version, 40)} is newer than this collcheck understands "
            f"({lf.FORMAT_VERSION}); upgrade collcheck"
        )
    for key in ("rank", "world", "run"):
        if key not in header:
            raise LogError(f"{shown(path)}: header lacks {key!r}")
    rank, world = header["rank"], header["world"]
    if rank.__class__ is not int or world.__class__ is not int or not 0 <= rank < world <= MAX_WORLD:
        raise LogError(f"{shown(path)}: header has an impossible rank/world ({one_line(rank, 40)}/{one_line(world, 40)}"
                       f"{'; at most ' + format(MAX_WORLD, ',') + ' ranks' if world.__class__ is int else ''})")
    why = problem(header)
    if why is not None:
        raise LogError(f"{shown(path)}: malformed header: {why}")
    return known_header(header)


def parse_header(data: bytes, path: str) -> dict:
    """The checked header (the first record)."""
    if not data:
        raise LogError(f"{shown(path)}: empty file (the rank was killed before its first record?)")
    for _, header, _ in LogStream(data, path, header_only=True):
        return check_header(header, path)
    raise LogError(f"{shown(path)}: not a collcheck log (no readable header)")


def read_header(path: str, head: bytes | None = None) -> dict:
    """Only the header (for checking that files belong to one run before reading them): read
    from the first 4 KiB (`head`: those bytes, read already), or 64 KiB, or 1 MiB for a long one;
    never the whole file."""
    for size in (HEAD, 1 << 16):
        data = read_prefix(path, size) if head is None or size > HEAD else head
        try:
            return _header_of(data, path)
        except LogError:
            if len(data) < size:  # (the whole file was read: the error stands)
                raise
    return parse_header(read_prefix(path, MAX_HEADER), path)


def _header_of(data: bytes, path: str) -> dict:
    """parse_header's header, found at once where a log starts as the writer starts it: a frame
    that checks at byte 0, of no collective before it, whose first record is a header map."""
    found = frame_at(data, 0) if data and data[0] == lf.FRAME_MARK else None
    if found.__class__ is tuple and found[2] == 0:
        try:
            first = next(unpacker_for(memoryview(data)[found[0]:found[1]]))
        except (*READ_ERRORS, StopIteration, msgpack.OutOfData):
            first = None
        if first.__class__ is dict and first.get("k") == lf.HEADER:
            return check_header(first, path)
    return parse_header(data, path)


def read_ends(path: str, tail: int) -> tuple[bytes, bytes, int] | None:
    """A regular file's first HEAD bytes, its last `tail` bytes and where they start, with one
    open and one size (what a log's summary reads: its header, its last checkpoint); None when
    it is no regular file or cannot be read (read_header, reading it again, says why)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # (a device is never opened)
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        start = max(0, info.st_size - tail)
        return os.pread(fd, min(info.st_size, HEAD), 0), os.pread(fd, info.st_size - start, start), start
    except OSError:
        return None
    finally:
        os.close(fd)


def _plain_header(data: bytes) -> bool:
    """Whether the data starts with a header map: format 1 (format 2 starts with a frame, or
    with damage)."""
    if not data or not (0x80 <= data[0] <= 0x8F or data[0] in (0xDE, 0xDF)):
        return False
    try:
        first = next(unpacker_for(data[:1 << 16]))
    except (*READ_ERRORS, StopIteration, msgpack.OutOfData):
        return len(data) > 1 << 16  # a header longer than that: only format 1 starts so
    return isinstance(first, dict) and first.get("k") == lf.HEADER


class LogStream:
    """Every good record of a log's bytes in order, as (offset, record, event id): the event id
    of a C record (the how-many-th collective of the process, what D records name), else -1.

    Format 2 (frames): a frame whose length or CRC does not check is damage; reading goes on at
    the next frame that checks, and `damage` gets [start, end, collectives lost] (None: not
    known, at the end of the file). A frame that repeats an earlier one (a duplicated chunk) is
    skipped. Format 1 (a plain msgpack stream): reading stops at the first undecodable byte
    (`junk`). Either way a last frame or record cut short is a `torn` tail (a crash mid-write).
    The offset of a record is its frame's (format 2), where `LogStream(data, path, offset)`
    starts reading again. The frame reader (frames.py) keeps its state here too: every attribute
    is declared below (slots: nothing adds one elsewhere)."""

    __slots__ = ("check_colls", "colls", "crc_left", "damage", "data", "decoder_options", "duplicates", "expand_done",
                 "expect", "framed", "good_bytes", "header_only", "junk", "last_eid", "malformed", "path", "recent",
                 "start", "torn", "use_list", "world", "world_known")

    def __init__(self, data: bytes, path: str, start: int = 0, header_only: bool = False, use_list: bool = False,
                 expand_done: bool = True, check_colls: bool = True):
        self.data, self.path, self.start, self.use_list = data, path, start, use_list
        self.expand_done = expand_done  # False: a C record's completions stay in its `d` (format 2)
        # False: C records are yielded unchecked (the scanner checks them, faster: collcheck.logfile.scan)
        self.check_colls = check_colls
        # format 1 starts with its header, a msgpack map; anything else is format 2 (whose
        # first bytes may be damaged)
        if start:  # an offset read before: a frame's (format 2) or a record's own (format 1)
            self.framed = start >= len(data) or data[start] == lf.FRAME_MARK
        else:
            self.framed = not _plain_header(data)
        self.header_only = header_only
        self.decoder_options = dict(raw=False, strict_map_key=False, use_list=use_list, max_str_len=_MAX,
                                    max_bin_len=_MAX, max_array_len=_MAX, max_map_len=_MAX)
        self.damage: list[list] = []
        self.malformed: dict[int, str] = {}  # damage start -> why its record does not match the schema
        self.world, self.world_known = MAX_WORLD, False  # (the header's, once read: it bounds ranks)
        self.crc_left = CRC_BUDGET * len(data) + lf.MAX_FRAME  # (frames.resync)
        self.torn = False
        self.junk: str | None = None
        self.good_bytes = start
        self.duplicates = 0
        self.colls = 0  # C records written before the end of the last good frame (format 2)
        # the frame reader's place (frames.read_frames sets them where it starts): collectives
        # before the next frame as far as known (-1: not known), the event id of the last good
        # frame, and the CRCs of the good frames with that event id (a duplicated chunk repeats one)
        self.expect = 0
        self.last_eid = -1
        self.recent: list[int] = []

    def __iter__(self):
        return read_frames(self, self.start) if self.framed else self._plain()

    def _plain(self):
        """Format 1."""
        data, start = self.data, self.start
        unp = unpacker_for(data[start:] if start else data, self.use_list)
        tell = unp.tell
        eid = 0
        good = 0
        try:
            for rec in unp:
                kind = rec.get("k") if type(rec) is dict else None
                if kind.__class__ is not str or kind not in lf.ALL_KINDS:
                    self.junk = f"unexpected data at byte {start + good}"
                    break
                if self.header_only or (kind == lf.COLL and not self.check_colls):
                    why = None
                elif kind == lf.COLL:
                    why = coll_problem(rec, self.world)
                else:
                    why = problem(rec, self.world)
                    if why is None and kind == lf.HEADER and not self.world_known:
                        self.world, self.world_known = rec["world"], True
                if why is not None:
                    malformed(self, start + good, start + tell(), int(kind == lf.COLL), why)
                elif kind == lf.COLL:
                    yield start + good, rec, eid
                else:
                    yield start + good, rec, -1
                if kind == lf.COLL:
                    eid += 1
                good = tell()
                self.good_bytes = start + good
                if self.header_only:
                    return
                if kind == lf.HEADER and why is None and rec.get("v", 1) >= 2:
                    # format 2 whose first frame lost its frame header: go on with the frames
                    self.framed = True
                    self.damage.append([0, 0, 0])
                    yield from read_frames(self, start + good)
                    return
        except READ_ERRORS as exc:
            self.junk = f"undecodable data at byte {start + good} ({type(exc).__name__})"
        if self.junk is None and start + good < len(data):
            self.torn = True
        elif self.junk is not None and not any(data[start + good:]):
            self.junk, self.torn = None, True  # zero padding after a crash


def parse_log(data: bytes, path: str = "<bytes>") -> RawLog:
    """Every good record (for tests and tools; the analysis uses collcheck.logfile.scan)."""
    header = parse_header(data, path)
    stream = LogStream(data, path, use_list=True)
    records = [rec for _, rec, _ in stream]  # (the first: the header, which the schema accepts too)
    return RawLog(path, header, records[1:], len(data), stream.good_bytes, stream.torn, stream.junk, stream.damage)
