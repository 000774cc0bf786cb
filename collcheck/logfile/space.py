"""The log file's space on disk, for the pure-Python path: allocated ahead of the records, so that a
full disk, a quota or a file size limit leaves room for the record that says so.

Space is allocated past the file's end without changing its size (fallocate's KEEP_SIZE, through
libc): the file holds its records and nothing else, so a reader finds its last checkpoint at its
very end even when the process was killed, and an append into allocated space cannot fail for
lack of it. RESERVE bytes past the last frame are always allocated; a file size limit
(RLIMIT_FSIZE) is kept RESERVE bytes short of, since the kernel refuses a write past it whatever
is allocated. Where the file system cannot allocate ahead (EOPNOTSUPP: some network file systems;
no libc fallocate) the file is written as before, without the room. The compiled path does the
same in C++ on a shared mapping of the file (capture/native/fastpath.cpp, WriterLock).

Standard library only: this module runs in the training job.
"""

from __future__ import annotations

import errno
import os
import sys

RESERVE = 4096  # bytes allocated past the last frame: room for the stop record (fastpath.cpp's kReserve)
CHUNK = 64 << 10  # bytes allocated at a time (one fallocate per ~1,300 collectives)
KEEP_SIZE = 1  # FALLOC_FL_KEEP_SIZE
# fallocate's errors that say the file system cannot allocate ahead, not that it is full
CANNOT_ALLOCATE = frozenset(getattr(errno, n) for n in ("EOPNOTSUPP", "ENOTSUP", "ENOSYS", "EINVAL", "EBADF", "ENODEV",
                                                         "ESPIPE") if hasattr(errno, n))
_fallocate = None  # libc's fallocate64, loaded on first use (False: none here)


def _libc_fallocate():
    """fallocate(fd, mode, offset, length) -> 0 or -1 (errno: ctypes.get_errno()), or None."""
    global _fallocate
    if _fallocate is None:
        _fallocate = False
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                f = getattr(libc, "fallocate64", None) or libc.fallocate
                f.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
                f.restype = ctypes.c_int
                _fallocate = (f, ctypes.get_errno)
            except (OSError, AttributeError):
                pass
    return _fallocate or None


def allocate_past_end(fd: int, offset: int, length: int) -> bool:
    """Allocate [offset, offset + length) of the file without changing its size: True; False where
    the file system cannot; OSError when there is no room (ENOSPC, EDQUOT)."""
    found = _libc_fallocate()
    if found is None:
        return False
    call, get_errno = found
    while call(fd, KEEP_SIZE, offset, length) != 0:
        code = get_errno()
        if code == errno.EINTR:
            continue
        if code in CANNOT_ALLOCATE:
            return False
        raise OSError(code, os.strerror(code))
    return True


def file_size_limit() -> int | None:
    """The process's RLIMIT_FSIZE in bytes (None: unlimited)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def allocation_chunk(segment_bytes: int) -> int:
    """Space allocated at a time: CHUNK, less for small segments."""
    return max(16 << 10, min(CHUNK, segment_bytes // 4)) if segment_bytes > 0 else CHUNK


def allocate(fd: int, n: int) -> None:
    """The first n bytes of a new file allocated (OSError when there is no room); nothing where the
    file system cannot allocate ahead."""
    allocate_past_end(fd, 0, n)


def error_name(exc: BaseException) -> str | None:
    """'ENOSPC' for an OSError of that errno; None for anything else."""
    code = getattr(exc, "errno", None)
    return errno.errorcode.get(code) if isinstance(code, int) else None


class Counters:
    """The current segment's file and the bytes written to it (LogWriter.counters) on the pure-Python
    path: the compiled path's WriterLock has the same fields and methods. Frames are appended
    (O_APPEND); RESERVE bytes past them are allocated."""

    def __init__(self):
        self._fd = -1
        self.origin = 0  # the file's size when it was handed over (a file appended to)
        self.written = 0
        self.segment_bytes = 0  # 0: never start a new segment
        self.allocated = 0  # bytes from `origin` on allocated: the writer's and the room past them
        self.can_allocate = True  # False: the file system cannot allocate ahead (no room is kept)

    @property
    def fd(self) -> int:
        return self._fd

    @fd.setter
    def fd(self, fd: int) -> None:
        """A new file (a new segment's): nothing allocated by this writer yet."""
        self._fd = fd
        self.allocated = 0
        self.can_allocate = True
        self.origin = os.fstat(fd).st_size if fd >= 0 else 0

    def append(self, data: bytes) -> None:
        """Append `data` with RESERVE bytes allocated past it; OSError when that room cannot be had
        (ENOSPC, EDQUOT; EFBIG past the file size limit) or the write fails."""
        need = self.written + len(data) + RESERVE
        if need > self.allocated:
            self._allocate(need)
        self._put(data)

    def append_reserved(self, data: bytes) -> None:
        """The last frame (the stop record): into the room kept for it, allocating nothing."""
        self._put(data)

    def _put(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]
        self.written += len(data)

    def _allocate(self, need: int) -> None:
        """`need` bytes from `origin` on allocated: a chunk at a time while there is room, else
        exactly `need`; never past the file size limit (read each time: the job may set it)."""
        limit = file_size_limit()
        most = None if limit is None else limit - self.origin
        if most is not None and need > most:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG))  # (a write past the limit would fail)
        if not self.can_allocate:
            return
        chunk = allocation_chunk(self.segment_bytes)
        ends = [-(-need // chunk) * chunk, need]
        if most is not None:
            ends[0] = min(ends[0], most)
        error = None
        for end in ends:
            try:
                if not allocate_past_end(self._fd, self.origin + self.allocated, end - self.allocated):
                    self.can_allocate = False  # (written as before, without the room kept)
                    return
            except OSError as exc:
                error = exc
                continue
            self.allocated = end
            return
        raise error

    def trim(self) -> None:
        """Before the file is closed: give back the space allocated past its end (a truncation to
        its own size frees it)."""
        if self._fd >= 0 and self.allocated > self.written:
            os.ftruncate(self._fd, self.origin + self.written)
            self.allocated = self.written
