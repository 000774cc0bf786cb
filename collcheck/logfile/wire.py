"""Plain data between collcheck's own processes (the TUI's loader process and the app): msgpack of
builtins, each message a 4-byte length and its bytes. Decoded bounded and never unpickled: what
crosses may hold strings from the logs, and nothing in it can run code."""

from __future__ import annotations

import os

import msgpack

__all__ = ["Receiver", "pack", "send", "unpack"]

MAX_MESSAGE = 1 << 31  # a message longer than this is not from our own process


TUPLE = 1  # the ext type of a tuple: what crosses comes back with its tuples and lists as they were


def _tuple(obj):
    if obj.__class__ is tuple:
        return msgpack.ExtType(TUPLE, pack(list(obj)))
    raise TypeError(f"not plain data: {type(obj).__name__}")


def _ext(code: int, data: bytes):
    if code != TUPLE:
        raise ValueError(f"unknown ext type {code}")
    return tuple(unpack(data))


def pack(obj) -> bytes:
    """`obj` (dicts, lists, tuples, str, bytes, numbers, bool, None) as msgpack; TypeError for
    anything else (a subclass of one of them included)."""
    return msgpack.packb(obj, use_bin_type=True, strict_types=True, default=_tuple)


def unpack(data: bytes):
    """What `pack` packed, tuples as tuples and lists as lists."""
    return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext)


def send(fd: int, obj) -> None:
    """One message on a pipe's file descriptor."""
    data = pack(obj)
    view = memoryview(len(data).to_bytes(4, "big") + data)
    while view:
        view = view[os.write(fd, view):]


class Receiver:
    """The messages of a pipe's reading end, `alive()` asked while none comes (a process whose
    workers still hold the pipe open has ended all the same); EOFError when it ends."""

    def __init__(self, fd: int, alive):
        self.fd, self.alive = fd, alive

    def _read(self, n: int) -> bytes:
        import select

        chunks, left = [], n
        while left:
            if not select.select([self.fd], [], [], 0.5)[0]:
                if not self.alive() and not select.select([self.fd], [], [], 0)[0]:
                    raise EOFError
                continue
            data = os.read(self.fd, min(left, 1 << 20))
            if not data:
                raise EOFError
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)

    def receive(self):
        """The next message, unpacked."""
        n = int.from_bytes(self._read(4), "big")
        if n > MAX_MESSAGE:
            raise EOFError
        return unpack(self._read(n))
