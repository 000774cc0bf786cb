"""Append-only log of one rank: one write(2) per collective, one frame per write, strings interned.

Durability rule (docs/log-format.md): the record of a collective reaches the OS
before the collective is issued, so it survives SIGKILL/SIGABRT of a rank that is
blocked inside it (the page cache outlives the process). Small follow-up records
(return/completion times) are queued and ride along with the next write, or are
flushed by the watchdog thread within a fraction of a second.
"""

from __future__ import annotations

import errno
import os
import threading

import msgpack

from .. import logformat as lf

_pack = msgpack.Packer(use_bin_type=True).pack  # not thread-safe: only used under the lock


def open_exclusive(directory: str, base: str) -> tuple[int, str]:
    """Create a new log file that no other process is using (restarts, forks, reruns)."""
    os.makedirs(directory, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
    candidates = [base, f"{base}.{os.getpid()}"] + [f"{base}.{os.getpid()}.{i}" for i in range(1, 100)]
    for name in candidates:
        path = os.path.join(directory, name + lf.LOG_SUFFIX)
        try:
            return os.open(path, flags, 0o644), path
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, f"no free log file name for {base} in {directory}")


class LogWriter:
    """Owns one rank's file descriptor and its intern tables. All methods are thread-safe."""

    def __init__(self, fd: int, path: str, lock=None):
        self.fd = fd
        self.path = path
        # the compiled fast path's WriterLock when it is loaded: it writes records itself under it
        self.lock = threading.Lock() if lock is None else lock
        self._pending: list[bytes] = []
        self._strings: dict[str, int] = {}
        self._sites: dict[tuple, int] = {}
        self._tspecs: dict[tuple, int] = {}
        self.closed = False
        self.colls = 0  # C records written so far (the frame field), when the caller passes eids
        # how many C records have been written, for frames without one; the compiled path,
        # which writes C records itself, replaces it with its own counter
        self.colls_written = lambda: self.colls

    # -- interning (call with self.lock held) -------------------------------------
    def string_id(self, s: str) -> int:
        i = self._strings.get(s)
        if i is None:
            i = self._strings[s] = len(self._strings)
            self._pending.append(_pack({"k": lf.STRING, "i": i, "s": s}))
        return i

    def site_id(self, filename: str, line: int, func: str) -> int:
        key = (filename, line, func)
        i = self._sites.get(key)
        if i is None:
            f, n = self.string_id(filename), self.string_id(func)
            i = self._sites[key] = len(self._sites)
            self._pending.append(_pack({"k": lf.SITE, "i": i, "f": f, "l": line, "n": n}))
        return i

    def tspec_id(self, key: tuple) -> int:
        """key: tuple of (dtype str, shape tuple) for the tensors that ranks must agree on."""
        i = self._tspecs.get(key)
        if i is None:
            spec = [[self.string_id(d), list(s)] for d, s in key]
            i = self._tspecs[key] = len(self._tspecs)
            self._pending.append(_pack({"k": lf.TSPEC, "i": i, "t": spec}))
        return i

    # -- output (call with self.lock held) ----------------------------------------
    def queue(self, record: dict) -> None:
        self._pending.append(_pack(record))

    def write(self, record: dict | None = None, eid: int | None = None) -> None:
        """Write queued records plus `record` in one frame, one write(2) call; `eid`: the event id
        of `record` when it is a C record (the frame carries the count of C records before it)."""
        if record is not None:
            self._pending.append(_pack(record))
        if not self._pending or self.closed:
            return
        if eid is None and record is not None and record.get("k") == lf.COLL:
            eid = self.colls_written()
        if eid is None:
            before = self.colls_written()
        else:
            before, self.colls = eid, eid + 1
        data = lf.frame(b"".join(self._pending), before)
        self._pending.clear()
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def close(self) -> None:
        with self.lock:
            if not self.closed:
                self.write()
                self.closed = True
                if hasattr(self.lock, "closed"):
                    self.lock.closed = True  # what the compiled path checks
                os.close(self.fd)
