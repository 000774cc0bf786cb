"""Read one rank's log: every complete record, the torn tail, and clear errors for bad files.

Log files are data: they are decoded with msgpack only (no pickle, no eval), with
limits on container and string sizes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

import msgpack

from . import logformat as lf


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
    good_bytes: int = 0  # offset after the last complete record
    torn: bool = False  # bytes after the last complete record (crash while writing)
    junk: str | None = None  # why reading stopped early, if not a torn tail


_MAX = 64 * 1024 * 1024


def read_log(path: str) -> RawLog:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise LogError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LogError(f"{path}: is a directory, not a log file") from None
    except OSError as exc:
        raise LogError(f"{path}: cannot read: {exc.strerror}") from None
    return parse_log(data, path)


def unpacker_for(data: bytes, use_list: bool = False) -> msgpack.Unpacker:
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


def parse_header(data: bytes, path: str) -> tuple[dict, msgpack.Unpacker]:
    """The checked header, and a decoder positioned on the record after it."""
    if not data:
        raise LogError(f"{path}: empty file (the rank was killed before its first record?)")
    unpacker = unpacker_for(data)
    try:
        header = next(unpacker)
    except StopIteration:
        raise LogError(f"{path}: not a collcheck log (no readable header)") from None
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError):
        raise LogError(f"{path}: not a collcheck log (no readable header)") from None
    if isinstance(header, dict):
        header = {k: (list(v) if isinstance(v, tuple) else v) for k, v in header.items()}
    return check_header(header, path), unpacker


def read_header(path: str) -> dict:
    """Only the header (for checking that files belong to one run before reading them)."""
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 16)
    except OSError as exc:
        raise LogError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        return parse_header(data, path)[0]
    except LogError as exc:
        if len(data) == 1 << 16 and "no readable header" in str(exc):  # a header larger than 64 KiB
            return read_log(path).header
        raise


def parse_log(data: bytes, path: str = "<bytes>") -> RawLog:
    """Every complete record (for tests and tools; the analysis uses collcheck.scan)."""
    if not data:
        raise LogError(f"{path}: empty file (the rank was killed before its first record?)")
    unpacker = unpacker_for(data, use_list=True)
    records: list[dict] = []
    good = 0
    junk = None
    try:
        for obj in unpacker:
            if not isinstance(obj, dict) or obj.get("k") not in lf.ALL_KINDS:
                junk = f"unexpected data at byte {good}"
                break
            records.append(obj)
            good = unpacker.tell()
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, TypeError) as exc:
        junk = f"undecodable data at byte {good} ({type(exc).__name__})"
    if not records:
        raise LogError(f"{path}: not a collcheck log (no readable header)")
    header = check_header(records[0], path)
    torn = good < len(data) and junk is None
    if junk is not None and all(b == 0 for b in data[good:]):
        junk, torn = None, True  # zero padding after a crash
    return RawLog(path, header, records[1:], len(data), good, torn, junk)


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
        raise LogError(f"{target}: no collcheck logs (*{lf.LOG_SUFFIX}) found")
    return sorted(found)
