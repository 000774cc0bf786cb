"""Read one rank's log: every complete record, the torn tail, and clear errors for bad files.

Log files are data: they are decoded with msgpack only (no pickle, no eval), with
limits on container and string sizes.
"""

from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field

import msgpack

from . import logformat as lf
from .frames import READ_ERRORS, read_frames


class LogError(Exception):
    """A file that cannot be read as a collcheck log; the message is one line for users."""


def latest_run(target: str) -> str:
    """A logs root with several run directories: take the newest one (said on stderr)."""
    if not os.path.isdir(target):
        return target
    entries = [os.path.join(target, d) for d in os.listdir(target)]
    if any(e.endswith(".msgpack") for e in entries):
        return target
    runs = [e for e in entries if os.path.isdir(e)]
    if len(runs) > 1:
        newest = max(runs, key=os.path.getmtime)
        print(f"collcheck: {target} holds {len(runs)} runs; using the newest, {newest}", file=sys.stderr)
        return newest
    return target


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
def _names(directory: str, mtime_ns: int) -> tuple[str, ...]:
    return tuple(os.listdir(directory))


def segment_paths(path: str) -> list[str]:
    """The later segments of a capped log (`<path>.1`, `<path>.2`, ...: the oldest may have been
    deleted), in order."""
    directory, base = os.path.split(path)
    directory = directory or "."
    try:
        names = _names(directory, os.stat(directory).st_mtime_ns)
    except OSError:
        return []
    found = [(int(n[len(base) + 1:]), n) for n in names
             if n.startswith(base + ".") and n[len(base) + 1:].isdigit()]
    return [os.path.join(directory, n) for _, n in sorted(found)]


def read_bytes(path: str) -> bytes:
    """A log's bytes: its first file and its later segments, one stream of frames."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        for seg in segment_paths(path):
            try:
                with open(seg, "rb") as f:
                    data += f.read()
            except FileNotFoundError:  # deleted by the writer meanwhile (a live run)
                continue
        return data
    except FileNotFoundError:
        raise LogError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LogError(f"{path}: is a directory, not a log file") from None
    except OSError as exc:
        raise LogError(f"{path}: cannot read: {exc.strerror}") from None


def unpacker_for(data, use_list: bool = False) -> msgpack.Unpacker:
    """A bounded msgpack decoder over `data` (never pickle, never eval)."""
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, use_list=use_list,
                                max_buffer_size=max(len(data), 1), max_str_len=_MAX, max_bin_len=_MAX,
                                max_array_len=_MAX, max_map_len=_MAX)
    unpacker.feed(data)
    return unpacker


def check_header(header, path: str) -> dict:
    if not isinstance(header, dict) or header.get("k") != lf.HEADER or header.get("magic") != lf.MAGIC:
        raise LogError(f"{path}: not a collcheck log (bad magic)")
    version = header.get("v")
    if not isinstance(version, int) or version > lf.FORMAT_VERSION:
        raise LogError(
            f"{path}: log format version {version} is newer than this collcheck understands "
            f"({lf.FORMAT_VERSION}); upgrade collcheck"
        )
    for key in ("rank", "world", "run"):
        if key not in header:
            raise LogError(f"{path}: header lacks {key!r}")
    if not isinstance(header["rank"], int) or not isinstance(header["world"], int) or not 0 <= header["rank"] < header["world"]:
        raise LogError(f"{path}: header has an impossible rank/world ({header['rank']!r}/{header['world']!r})")
    return header


def parse_header(data: bytes, path: str) -> dict:
    """The checked header (the first record)."""
    if not data:
        raise LogError(f"{path}: empty file (the rank was killed before its first record?)")
    for _, header, _ in LogStream(data, path, header_only=True):
        if isinstance(header, dict):
            header = {k: (list(v) if isinstance(v, tuple) else v) for k, v in header.items()}
        return check_header(header, path)
    raise LogError(f"{path}: not a collcheck log (no readable header)")


def read_header(path: str) -> dict:
    """Only the header (for checking that files belong to one run before reading them)."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16)
    except OSError as exc:
        raise LogError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return parse_header(data, path)
    except LogError as exc:
        if len(data) == 1 << 16 and "no readable header" in str(exc):  # a header larger than 64 KiB
            return read_log(path).header
        raise


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
    starts reading again."""

    def __init__(self, data: bytes, path: str, start: int = 0, header_only: bool = False, use_list: bool = False,
                 expand_done: bool = True):
        self.data, self.path, self.start, self.use_list = data, path, start, use_list
        self.expand_done = expand_done  # False: a C record's completions stay in its `d` (format 2)
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
        self.torn = False
        self.junk: str | None = None
        self.good_bytes = start
        self.duplicates = 0
        self.colls = 0  # C records written before the end of the last good frame (format 2)

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
                if type(rec) is not dict or rec.get("k") not in lf.ALL_KINDS:
                    self.junk = f"unexpected data at byte {start + good}"
                    break
                if rec["k"] == lf.COLL:
                    yield start + good, rec, eid
                    eid += 1
                else:
                    yield start + good, rec, -1
                good = tell()
                self.good_bytes = start + good
                if self.header_only:
                    return
                if rec["k"] == lf.HEADER and isinstance(rec.get("v"), int) and rec["v"] >= 2:
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
    """Every good record (for tests and tools; the analysis uses collcheck.scan)."""
    if not data:
        raise LogError(f"{path}: empty file (the rank was killed before its first record?)")
    stream = LogStream(data, path, use_list=True)
    records = [rec for _, rec, _ in stream]
    if not records:
        raise LogError(f"{path}: not a collcheck log (no readable header)")
    header = check_header(records[0], path)
    return RawLog(path, header, records[1:], len(data), stream.good_bytes, stream.torn, stream.junk, stream.damage)


def find_logs(target: str) -> list[str]:
    """Log files under a run directory (recursively), or the file itself."""
    if os.path.isfile(target):
        return [target]
    if not os.path.exists(target):
        raise LogError(f"{target}: no such file or directory")
    found = []
    for root, _, files in os.walk(target):
        found += [os.path.join(root, f) for f in files if f.endswith(lf.LOG_SUFFIX)]
    if not found:
        raise LogError(f"{target}: no collcheck logs (*{lf.LOG_SUFFIX}) or Flight Recorder dumps found")
    return sorted(found)
