"""Live mode: a rank's log through the job's store, for the checker's report (docs/live.md,
"Multi-node"). Where each node writes COLLCHECK_DIR to a disk of its own, no host can read the
other nodes' logs: the report is built from what the ranks publish here, on every cluster alike.

When the checker has a suspicion to analyse it sets a request (keys.REQUEST_KEY, a number); each
rank's publisher sees it at its next turn and answers with its log as it stands: the writer's
queued records are written first (under its lock, which is held only to note the files and
their sizes), then the bytes are read and sent without it. A rank whose log is closed (it
exited, or stopped recording) can no longer answer: it leaves the closed log in the store then
(`leave`), for a checker that asks after the process is gone.

What is sent: the log's files in order (the first file, then its later segments: one stream of
frames, as the reader reads them), at most `cap(world, budget)` bytes. A larger log sends its
newest later segments that fit (each later segment reads on its own: header, tables, counters),
the first file and older segments left out; a log with no later segment that fits sends nothing.
The stream goes in CHUNK pieces, each zlib-compressed, under `<prefix><i>`, then a manifest
under its key, whose presence says the pieces are there: msgpack {"v", "rank", "restart",
"size" (bytes sent), "chunks", "hash" (blake2b-128 of them), "log" (bytes of the whole log),
"parts" ([segment, bytes sent] each), "gen" (a left log's), "kind" (the kind's digest, when it
sent the whole log for its kind)}. Memory: one chunk at a time.

Thousands of ranks issue the same collectives: a rank answering a request first ends its log with
a checkpoint (logfile/checkpoint.py: every group's count and rolling hash, the collectives open
and failed, what it interned), then counts itself in under the digest of that checkpoint
(`kind_key`, one `add`). The first rank of a kind sends its whole log; the others send only its
end, in the manifest itself ({"v", "rank", "restart", "log", "tail": bytes}, no chunks): a log of
two frames, their header (marked `tail`) and the checkpoint, which the judge reads as a rank of
that kind (model/load.py folds ranks whose checkpoints are equal: one read in full, the others
share its columns) and never in full. A rank whose log does not fit whole, or that cannot write
a checkpoint now (recording paused or stopped), sends its log as before.

Standard library, msgpack and torch's store only: this runs in the training job.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import zlib

import msgpack

from ...logfile import format as lf
from .keys import answer_keys, arrival_keys, final_keys, kind_key

VERSION = 1
LOG_CAP = 32 << 20  # a rank's log sent at most: the newest later segments that fit, past it
CHUNK = 4 << 20  # bytes of the log in one value of the store (before compression)
REQUEST_BUDGET = 4 << 30  # every rank's answer to one request, at most: the cap shrinks past 128 ranks
FINAL_BUDGET = 256 << 20  # the logs left in the store at most (until the job ends): shrinks past 8 ranks
LEVEL = 1  # zlib's fastest: a log of interned records compresses well at any level
MAX_END = 1 << 16  # a log's end sent in its manifest, at most (header and checkpoint: a few hundred bytes)

_lock = threading.Lock()
_answered: dict[int, int] = {}  # rank -> the last request answered here (its publisher and its checker both may)
_left: dict[int, tuple[str, int]] = {}  # rank -> (chunk prefix, chunks) of the log this process left last


def cap(world: int, budget: int) -> int:
    """The bytes of one rank's log sent at most, in a job of `world` ranks."""
    return min(LOG_CAP, budget // max(world, 1))


def choose(parts: list[tuple], most: int) -> list[tuple]:
    """The parts (path, segment, bytes) sent of a log: all when they fit in `most` bytes, else the
    newest later segments that do (the first file is not needed: each later segment reads on its
    own), else none."""
    if sum(p[2] for p in parts) <= most:
        return list(parts)
    chosen, used = [], 0
    for part in reversed(parts[1:]):
        if used + part[2] > most:
            break
        chosen.append(part)
        used += part[2]
    return chosen[::-1]


def answer(rec, store, request: int) -> bool:
    """Send this rank's log as it stands in answer to `request` (once: the checker on this rank
    answers for it too); False when it was answered already."""
    rank = rec.rank
    with _lock:
        if _answered.get(rank) == request:
            return False
        _answered[rank] = request
    key, prefix = answer_keys(request, rank)
    send(rec, store, key, prefix, REQUEST_BUDGET, request=request)
    count, _ = arrival_keys(request, 0)
    store.set(arrival_keys(request, store.add(count, 1))[1], str(rank))  # (after the manifest: it is there)
    return True


def leave(rec, store) -> None:
    """The rank's log is closed: leave it in the store (FINAL_BUDGET) for a checker that asks later,
    in place of one this process left before (an earlier log: collcheck.disable() then enable())."""
    gen, rank = time.time_ns(), rec.rank
    key, prefix = final_keys(rank, gen)
    chunks = send(rec, store, key, prefix, FINAL_BUDGET, gen=gen)
    before = _left.get(rank)
    _left[rank] = (prefix, chunks)
    if before is not None and before[0] != prefix:
        for i in range(before[1]):
            store.delete_key(f"{before[0]}{i}")


def send(rec, store, key: str, prefix: str, budget: int, request: int | None = None, **meta) -> int:
    """The log's chosen parts in chunks under `prefix`, then the manifest under `key`; returns the
    number of chunks. `request`: in answer to it (a rank of a kind another rank sends whole
    sends only its end), else (a closed log, left) the whole log."""
    w = rec.writer
    header = w.header or {}
    world = header.get("world", 1)
    files, total, end = _open_parts(rec, cap(world, budget), request is not None)
    sent = {"v": VERSION, "rank": rec.rank, "restart": header.get("restart", 0), "log": total, **meta}
    try:
        ending = end_of_log(header, *end) if end is not None else b""
        if 0 < len(ending) <= MAX_END:
            digest = kind_digest(header, end[0])
            if store.add(kind_key(request, digest), 1) == 1:
                sent["kind"] = digest  # (the first of its kind: the whole log)
            else:
                sent["tail"] = ending
        if "tail" not in sent:
            sent.update(_send_files(store, prefix, files))
    finally:
        for fd, _, _ in files:
            os.close(fd)
    store.set(key, msgpack.packb(sent))
    return sent.get("chunks", 0)


def kind_digest(header: dict, checkpoint: dict) -> str:
    """The digest of what ranks of one kind share (logfile/tail.py Tail.key, with nothing after
    the checkpoint; model/load.py's kinds): their checkpoints but for why it was written, their
    restart and backend."""
    fields = sorted((k, v) for k, v in checkpoint.items() if k != "w")
    text = repr((header.get("restart", 0), header.get("backend"), fields)).encode()
    return hashlib.blake2b(text, digest_size=16).hexdigest()


def end_of_log(header: dict, checkpoint: dict, colls: int) -> bytes:
    """A log's end as a log of its own: its header marked `tail` (model/load.py never reads it
    in full), then the checkpoint (`colls`: the collectives written before it)."""
    pack = msgpack.Packer(use_bin_type=True).pack
    return lf.frame(pack({**header, "tail": 1}), 0) + lf.frame(pack(checkpoint), colls)


def _open_parts(rec, most: int, ending: bool = False) -> tuple[list[tuple], int, tuple | None]:
    """The chosen parts of the log, opened, as (fd, segment, bytes), the whole log's bytes, and
    with `ending` (checkpoint, collectives before it) when the log could end with a checkpoint
    now and fits whole: the queued records written first, the files noted and opened under
    the writer lock (the writer deletes old segments under it), read after."""
    w = rec.writer
    opened, end = [], None
    with w.lock:
        if rec.active and not w.closed:
            rec.drain_completions()  # (completions the watchdog has not taken yet)
        w.write()
        if ending and rec.active and not w.closed and w.stopped is None and w.header is not None and \
                sum(p[2] for p in w.parts()) <= most:
            segment = w.segment
            end = (rec.write_checkpoint("share"), w.colls_written())
            if w.stopped is not None or w.segment != segment:
                end = None  # (the disk refused it, or a new segment follows it: the log as it is, whole)
        parts = w.parts()
        try:
            for path, segment, size in choose(parts, most):
                opened.append((os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), segment, size))
        except OSError:
            for fd, _, _ in opened:
                os.close(fd)
            opened, end = [], None  # (a file of the log cannot be read: nothing sent, the manifest says so)
    return opened, sum(p[2] for p in parts), end


def _send_files(store, prefix: str, files: list[tuple]) -> dict:
    """The files' bytes as one stream, CHUNK bytes a value, compressed; what the manifest says
    of them."""
    digest, chunk, n, parts = hashlib.blake2b(digest_size=16), bytearray(), 0, []
    for fd, segment, size in files:
        got = 0
        while got < size:
            try:
                data = os.pread(fd, min(CHUNK - len(chunk), size - got), got)
            except OSError:
                data = b""  # (the disk failed: what was read is sent, the manifest says how much)
            if not data:
                break  # (or shorter than written: cannot be, but never a loop)
            got += len(data)
            digest.update(data)
            chunk += data
            if len(chunk) == CHUNK:
                store.set(f"{prefix}{n}", zlib.compress(chunk, LEVEL))
                n, chunk = n + 1, bytearray()
        parts.append([segment, got])
    if chunk:
        store.set(f"{prefix}{n}", zlib.compress(chunk, LEVEL))
        n += 1
    return {"size": sum(p[1] for p in parts), "chunks": n, "hash": digest.hexdigest(), "parts": parts}
