"""The on-disk vocabulary shared by the writer (inside the training job) and the reader.

Standard library only (and the op table, ops.py): this module is imported by the recording hot path.

A log is a sequence of frames, one per write(2); a frame's payload is msgpack maps, each with
the key ``k`` naming its kind (one letter, to keep events small). See docs/log-format.md.

Version history:
  1  first format: a plain msgpack stream, no framing (read, never written).
  2  frames with a length and a CRC-32 (damage is found and skipped), per-group sequence
     numbers on collectives (`j`).
"""

import struct
import zlib

from .ops import WIRE_OPS

MAGIC = "collcheck-log"
FORMAT_VERSION = 2  # major version: readers refuse a larger one

# Frame: FRAME_MARK, CRC-32 (zlib, little-endian) of everything after it, uvarint payload
# length, uvarint count of C records written before this frame (the event id of its first C
# record), payload. 0xC1 is the one byte msgpack never uses: no record starts with it.
FRAME_MARK = 0xC1
MAX_FRAME = 1 << 26  # a longer length field is damage

# Record kinds
HEADER = "H"      # first record: magic, version, rank, world, run id, clocks, ...
STRING = "S"      # interned string: i -> s
SITE = "F"        # interned call site: i -> (file id, line, function id)
CHAIN = "K"       # interned call chain: i -> [site ids], the user's frames outermost first
TSPEC = "V"       # interned tensor spec list: i -> [[dtype id, [dims]], ...]
THREAD = "T"      # thread: h -> name, ident
GROUP = "G"       # process-group lifecycle: init / new / destroy, members, name
COLL = "C"        # one wire collective (or P2P op), written before it is issued
DONE = "D"        # return / completion times of a COLL, or the error it raised
API = "A"         # an API call that issued several wire ops (object collectives, ...)
STACKS = "W"      # watchdog: all threads' Python stacks while a COLL was stuck
EXCEPTION = "X"   # uncaught exception in the process
TRAILER = "Z"     # clean interpreter exit
DISABLED = "Q"    # recording stopped: an internal error, or a write of the log failed (disk full: the last record)
NON_MEMBER = "N"  # a collective call torch skipped: this rank is not in the group it named
SYNC = "Y"        # the CPU thread waited at a sync point for a collective (stream semantics: simnccl)
COUNTERS = "J"    # at the start of a segment: the last `j` of every group and P2P channel
STEP = "O"        # an optimizer finished a step (torch.optim's global step hook): where training steps end
CHECKPOINT = "P"  # per group and channel: collectives issued and their rolling hash (logfile/checkpoint.py)
FILE = "L"        # a call site's file as it was when first seen: size, mtime; its hash at exit (blame from the source)
SOURCE = "U"      # the rank a receive from any source got its message from (what dist.recv returned)

ALL_KINDS = frozenset(
    (HEADER, STRING, SITE, CHAIN, TSPEC, THREAD, GROUP, COLL, DONE, API, STACKS, EXCEPTION, TRAILER, DISABLED, NON_MEMBER,
     COUNTERS, SYNC, STEP, CHECKPOINT, FILE, SOURCE)
)

LOG_SUFFIX = ".msgpack"
SIGTERM_SUFFIX = ".sigterm.txt"  # faulthandler's text dump when torchrun terminates the rank

_P2P_KINDS = {op: spec.p2p for op, spec in WIRE_OPS.items() if spec.p2p}


def seq_key(gid: int, op: str, peer) -> int:
    """What a C record's `j` counts: a group's collectives, or its P2P ops of one kind (send, recv,
    recv from any source) with one peer; an int, as the compiled writer keys it."""
    kind = _P2P_KINDS.get(op, 0)
    return (gid << 34) | (kind << 32) | ((peer or 0) & 0xFFFFFFFF if kind else 0)


_SMALL = [bytes((i,)) for i in range(0x80)]
_CRC = struct.Struct("<BI").pack


def uvarint(n: int) -> bytes:
    """LEB128, as the compiled writer packs it."""
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(payload: bytes, colls_before: int) -> bytes:
    """One frame around the records of one write(2)."""
    body = uvarint(len(payload)) + uvarint(colls_before) + payload
    return _CRC(FRAME_MARK, zlib.crc32(body)) + body
