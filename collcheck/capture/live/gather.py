"""Live mode, the checker's side of the logs through the store (share.py sends them): asked for,
waited for a bounded time, checked, and written as new files into a private folder of this host
that the judge reads as the run; then their keys are deleted. The snapshot comes from the store
alone, on one host as across nodes: the judge never reads another rank's folder.

What the store holds was written by other processes: it is data. No name from it becomes a path
(each rank's file is named here, `rank-<rank>.<restart>.msgpack`, after the rank whose key it
was); every size is checked against the caps before anything is read or allocated for it; a chunk
decompresses to CHUNK bytes at most; what is written must hash to what its manifest says, or the
rank counts as missing. Files are created new (O_EXCL, never through a link) in a folder made by
mkdtemp (mode 0700), removed after the report. A rank that did not answer in time is missing
from the snapshot, and the report says so (`Snapshot.notes`).

The ranks that sent only their log's end (share.py: a rank of a kind another sent whole) are no
files of their own: their ends go into one file of the folder (ENDS_FILE: msgpack {"v": 1,
"ends": [[rank, bytes], ...]}), which the judge hands to load_run (`ends`) as it reads it back
(`read_ends`): thousands of them cost one file, not thousands.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import tempfile
import time
import zlib
from dataclasses import dataclass, field

import msgpack

from ...logfile.format import LOG_SUFFIX
from .keys import (
    NO_REQUEST,
    REQUEST_KEY,
    REQUESTS_KEY,
    SIGNAL_KEY,
    answer_keys,
    arrival_keys,
    final_keys,
    kind_key,
)
from .share import CHUNK, LOG_CAP, MAX_END, REQUEST_BUDGET, cap

MAX_MANIFEST = (1 << 16) + MAX_END  # bytes of a manifest (a real one: about 100, plus 10 a segment, or a log's end)
ENDS_FILE = "ends.bin"  # the logs' ends, in the snapshot's folder (no log's name: not read as one)
MAX_PARTS = 1 << 12  # segments listed in one
MAX_STORED = CHUNK + CHUNK // 8 + (1 << 16)  # a compressed chunk at most (zlib grows incompressible data by ~0.03%)
MAX_RESTART = 1 << 20
HEX = frozenset("0123456789abcdef")
POLL_S = 0.05
LOOK_S = 0.5  # while no answer comes, the logs left by the ranks not in yet are looked for this often
OWN_AFTER_S = 0.3  # the checking rank answers no sooner: a collective's completion reaches its log in 0.2 s
PROGRESS_S = 1.0  # past the wait, the checker waits on while an answer came this recently ...
LONGEST = 4  # ... up to this many times the wait (thousands of ranks answering on a loaded store)
KEYS_PER_CHECK = 512  # keys a check or multi_get (as the checker's reads: checker.KEYS_PER_REQUEST)
PREFETCH_BYTES = 32 << 20  # logs whose chunks are read in one multi_get, at most (before compression)
WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass
class Snapshot:
    """A request's logs on this host: `folder` (one file per rank that answered), `notes` (a line
    per rank missing or sent in part), `late` (ranks whose answer may still come: deleted later)."""

    request: int
    folder: str
    notes: list[str] = field(default_factory=list)
    late: list[int] = field(default_factory=list)
    seen: int = 0  # the answers' arrival slots read (keys.arrival_keys)
    taken: list[tuple[int, int]] = field(default_factory=list)  # (rank, chunks) of each answer read
    kinds: set[str] = field(default_factory=set)  # the kinds' digests the whole logs named (share.py)
    ends: dict[int, bytes] = field(default_factory=dict)  # rank -> the end of its log, when it sent that
    ends_file: str | None = None  # where they are (ENDS_FILE), once written

    def forget(self, store, world: int) -> None:
        """Delete the request's keys: the answers read, those that came too late (past `seen`),
        the kinds' counters, the arrival counter and slots (after the report: off the way to it)."""
        for rank, chunks in self.taken:
            _delete(store, *answer_keys(self.request, rank), chunks)
        for digest in self.kinds:
            store.delete_key(kind_key(self.request, digest))
        self.taken, self.kinds = [], set()
        _forget_arrivals(store, self.request, self.seen, world)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class BadManifest(ValueError):
    """What a rank sent does not hold together: the rank is missing from the snapshot."""


def ask(store) -> int:
    """Ask every rank for its log: a new request number, set, and the publishers signalled. The
    number is the store's count of requests and 32 random bits: never one a rank answered before,
    also in a job that made a new store (a later log of the same processes)."""
    request = store.add(REQUESTS_KEY, 1) << 32 | random.getrandbits(32)
    store.set(REQUEST_KEY, str(request))
    store.add(SIGNAL_KEY, 1)
    return request


def gather(store, request: int, world: int, restart: int, wait_s: float, ended=(), last_answer=None) -> Snapshot:
    """Every rank's answer to `request` (or the log it left when it closed it, of this restart:
    looked for at each poll for the `ended` ranks, for every rank not in yet when no answer came)
    into a new private folder: waited for `wait_s`, and on while answers keep coming (one in the
    last PROGRESS_S), LONGEST times `wait_s` at most. `last_answer`: () -> None, the checking
    rank's own answer, given once every other rank is in or the wait is over, and OWN_AFTER_S
    after the request at the soonest (completions its threads have seen by then are in it)."""
    snap = Snapshot(request, tempfile.mkdtemp(prefix="collcheck-live-"))
    pending, stale, ended = set(range(world)), set(), set(ended)
    start = last = looked = time.monotonic()
    most = cap(world, REQUEST_BUDGET)
    try:
        while pending:
            if last_answer is not None and time.monotonic() > start + OWN_AFTER_S and (
                    len(pending) <= 1 or time.monotonic() > start + wait_s):
                last_answer()
                last_answer, last = None, time.monotonic()
            found = {r: (raw, True) for r, raw in _arrived(store, snap, world, pending)}
            now = time.monotonic()
            look = pending - stale - set(found)
            if found or now - looked < LOOK_S:
                look &= ended  # (a full look at every rank not in yet: when the answers pause)
            else:
                looked = now
            found.update((r, (raw, False)) for r, raw in _left(store, sorted(look)))
            _keep(store, request, found, restart, most, snap, stale)
            pending -= set(found) - stale
            now = time.monotonic()
            last = now if set(found) - stale else last
            if not pending or now > start + LONGEST * wait_s or (now > start + wait_s and now > last + PROGRESS_S):
                break
            time.sleep(POLL_S)
        store.set(REQUEST_KEY, NO_REQUEST)  # (not deleted: a publisher that saw it set reads it without waiting)
        if snap.ends:
            snap.ends_file = _write_ends(snap)
    except BaseException:
        snap.remove()
        raise
    snap.late = sorted(pending)
    waited = time.monotonic() - start
    waited = f"{waited:.0f} s" if waited >= 1 else f"{waited:.1f} s"
    snap.notes += [f"rank {r}: its log did not come through the store within {waited} (the rank did not "
                   "answer: killed, holding the interpreter, its recording paused, done with its process group "
                   "but not exited yet, or exited without leaving its log)" for r in snap.late]
    return snap


def _arrived(store, snap: Snapshot, world: int, pending: set) -> list[tuple[int, bytes]]:
    """(rank, manifest) of each rank that answered since the last look, as the arrival counter
    and its slots say (keys.arrival_keys): two requests when none did. At most `world` slots a
    look (the counter is data too)."""
    count_key, _ = arrival_keys(snap.request, 0)
    count = store.add(count_key, 0)
    upto = min(count, snap.seen + world, 2 * world)
    ranks = []
    for value in _written(store, [arrival_keys(snap.request, i)[1] for i in range(snap.seen + 1, upto + 1)]):
        snap.seen += 1
        if isinstance(value, bytes) and value.isdigit() and len(value) < 10 and int(value) in pending:
            ranks.append(int(value))
    ranks = sorted(set(ranks))
    keys = [answer_keys(snap.request, r)[0] for r in ranks]
    return [(r, raw) for r, raw in zip(ranks, _fetch(store, keys)) if raw is not None]


def _written(store, keys: list[str]) -> list:
    """The values of the longest run of `keys` from the first that are all in the store: a slot
    counted whose rank has not written it yet ends it (read at the next look). A check and a
    multi_get per KEYS_PER_CHECK keys, and a few checks (halving) where one is missing."""
    out = []
    for i in range(0, len(keys), KEYS_PER_CHECK):
        batch = keys[i:i + KEYS_PER_CHECK]
        there, missing = (len(batch), None) if store.check(batch) else (0, len(batch))
        while missing is not None and missing - there > 1:  # (batch[:there] all there, batch[:missing] not)
            mid = (there + missing) // 2
            if store.check(batch[:mid]):
                there = mid
            else:
                missing = mid
        out += store.multi_get(batch[:there]) if there else []
        if there < len(batch):
            break
    return out


def _left(store, ranks: list[int]) -> list[tuple[int, bytes]]:
    """(rank, manifest) of the ranks among `ranks` that left their log in the store (a check each)."""
    here = [r for r in ranks if store.check([final_keys(r, None)[0]])]
    return list(zip(here, _fetch(store, [final_keys(r, None)[0] for r in here])))


def _keep(store, request: int, found: dict, restart: int, most: int, snap: Snapshot, stale: set) -> None:
    """Check what the ranks sent, write each whole log into the snapshot's folder (their chunks
    read PREFETCH_BYTES at a time), say what is missing or in part; note the answers' keys to
    delete (Snapshot.forget)."""
    ready = []
    for rank, (raw, answered) in sorted(found.items()):
        try:
            m = manifest(raw, rank, most)
        except BadManifest as why:
            snap.notes.append(_refused(rank, why))
            m = None
        if answered:
            snap.taken.append((rank, m["chunks"] if m is not None else 0))
        if m is None:
            continue
        if answered and m["kind"] is not None:
            snap.kinds.add(m["kind"])
        if m["tail"] is not None:  # (only an answer's: a left log is whole)
            if answered:
                snap.ends[rank] = m["tail"]
            else:
                snap.notes.append(_refused(rank, "a left log that is only its end"))
        elif not answered and m["restart"] != restart:
            stale.add(rank)  # (a log of an earlier restart of the job)
        elif not answered and m["gen"] is None:
            snap.notes.append(_refused(rank, "no generation"))
        elif m["size"] == 0:
            snap.notes.append(f"rank {rank}: {_why_none(m['log'], most)}: not in the snapshot")
        else:
            ready.append((rank, m, answer_keys(request, rank)[1] if answered else final_keys(rank, m["gen"])[1]))
    for group in _groups(ready):
        values = iter(_fetch(store, [f"{prefix}{i}" for _, m, prefix in group for i in range(m["chunks"])]))
        for rank, m, _ in group:
            chunks = [next(values) for _ in range(m["chunks"])]
            try:
                _write(m, chunks, os.path.join(snap.folder, f"rank-{rank:05d}.{m['restart']}{LOG_SUFFIX}"))
            except BadManifest as why:
                snap.notes.append(_refused(rank, why))
                continue
            if m["size"] < m["log"] and not m["tail"]:  # (a log's end: a rank of a kind another sent whole)
                first, last = m["parts"][0][0], m["parts"][-1][0]
                snap.notes.append(f"rank {rank}: its log is {_mib(m['log'])}, over the {_mib(most)} a rank sends: "
                                  f"its newest {_mib(m['size'])} in the snapshot (segments {first}-{last})")


def _groups(ready: list[tuple]) -> list[list[tuple]]:
    """The ranks to fetch together, PREFETCH_BYTES of their logs at most (one rank's: LOG_CAP)."""
    groups, size = [], PREFETCH_BYTES
    for item in ready:
        if size + item[1]["size"] > PREFETCH_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += item[1]["size"]
    return groups


def _fetch(store, keys: list[str]) -> list:
    """The values of `keys`, None for one not in the store (a get would wait for it): one check
    and one multi_get per KEYS_PER_CHECK keys when all are there."""
    out = []
    for i in range(0, len(keys), KEYS_PER_CHECK):
        batch = keys[i:i + KEYS_PER_CHECK]
        if store.check(batch):
            out += store.multi_get(batch)
        else:
            out += [store.get(k) if store.check([k]) else None for k in batch]
    return out


def _refused(rank: int, why) -> str:
    return f"rank {rank}: what it sent through the store was not a log of it ({why}): not in the snapshot"


def manifest(raw: bytes, rank: int, most: int) -> dict:
    """A manifest, checked: BadManifest when it is not one this rank could have sent."""
    if not isinstance(raw, bytes) or len(raw) > MAX_MANIFEST:
        raise BadManifest("a manifest too large")
    try:
        m = msgpack.unpackb(raw, raw=False, strict_map_key=False, max_str_len=MAX_MANIFEST, max_bin_len=MAX_END,
                            max_array_len=MAX_PARTS, max_map_len=64)
    except Exception:
        raise BadManifest("not a manifest") from None
    if not isinstance(m, dict):
        raise BadManifest("not a manifest")

    def number(name: str, top: int) -> int:
        v = m.get(name)
        if v.__class__ is not int or not 0 <= v <= top:
            raise BadManifest(f"{name} out of range")
        return v

    tail = m.get("tail")
    if tail is not None:  # the end of the log, in the manifest (share.py)
        if tail.__class__ is not bytes or not tail or m.get("rank") != rank:
            raise BadManifest("an end of a log that is not one")
        return {"tail": tail, "size": len(tail), "chunks": 0, "hash": None, "parts": [], "log": number("log", 1 << 62),
                "restart": number("restart", MAX_RESTART), "kind": None, "gen": None}

    size, chunks = number("size", most), number("chunks", most // CHUNK + 1)
    if chunks != -(-size // CHUNK) or m.get("rank") != rank:
        raise BadManifest("sizes that do not add up")
    digest = m.get("hash")
    if not isinstance(digest, str) or len(digest) != 32 or not all(c in HEX for c in digest):
        raise BadManifest("no hash")
    parts = m.get("parts")
    if not isinstance(parts, list) or any(not isinstance(p, list) or len(p) != 2 or any(
            x.__class__ is not int or x < 0 for x in p) for p in parts) or sum(p[1] for p in parts) != size:
        raise BadManifest("parts that do not add up")
    kind = m.get("kind")
    if kind is not None and (not isinstance(kind, str) or len(kind) != 32 or not all(c in HEX for c in kind)):
        raise BadManifest("a kind that is not a digest")
    return {"size": size, "chunks": chunks, "hash": digest, "parts": parts, "log": number("log", 1 << 62),
            "restart": number("restart", MAX_RESTART), "tail": None, "kind": kind,
            "gen": m.get("gen") if m.get("gen").__class__ is int and 0 <= m.get("gen") < 1 << 63 else None}


def _write(m: dict, chunks: list, path: str) -> None:
    """The chunks, each checked and decompressed (CHUNK bytes at most), into a new file at `path`
    (never through a link) whose bytes must hash to the manifest's; BadManifest (no file) otherwise."""
    fd = os.open(path, WRITE, 0o600)
    digest, left = hashlib.blake2b(digest_size=16), m["size"]
    try:
        for packed in chunks:
            if not isinstance(packed, bytes) or len(packed) > MAX_STORED:
                raise BadManifest("a missing or oversized chunk")
            d = zlib.decompressobj()
            try:
                data = d.decompress(packed, CHUNK)
            except zlib.error:
                raise BadManifest("a damaged chunk") from None
            if len(data) != min(CHUNK, left) or not d.eof or d.unconsumed_tail or d.unused_data:
                raise BadManifest("a chunk of the wrong size")
            left -= len(data)
            digest.update(data)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        if digest.hexdigest() != m["hash"]:
            raise BadManifest("a hash that does not match")
    except BaseException:
        os.close(fd)
        os.unlink(path)
        raise
    os.close(fd)


def _write_ends(snap: Snapshot) -> str:
    """The ends the ranks sent, into ENDS_FILE of the snapshot's folder (new, never through a link)."""
    path = os.path.join(snap.folder, ENDS_FILE)
    data = memoryview(msgpack.packb({"v": 1, "ends": sorted(snap.ends.items())}))
    fd = os.open(path, WRITE, 0o600)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)
    return path


def read_ends(path: str, world: int) -> dict[int, bytes]:
    """ENDS_FILE read back (the judge): rank -> the end of its log, ranks below `world`, each
    MAX_END bytes at most; ValueError when it is not such a file."""
    with open(path, "rb") as f:
        data = f.read(world * (MAX_END + 16) + 64)
    d = msgpack.unpackb(data, raw=False, strict_map_key=False, max_bin_len=MAX_END, max_array_len=max(world, 2))
    ends = d.get("ends") if isinstance(d, dict) else None
    if not isinstance(ends, list) or not all(isinstance(e, list) and len(e) == 2 and e[0].__class__ is int and
                                            0 <= e[0] < world and e[1].__class__ is bytes for e in ends):
        raise ValueError(f"{path}: not the logs' ends")
    return dict(ends)


def _delete(store, key: str, prefix: str, chunks: int) -> None:
    for i in range(chunks):
        store.delete_key(f"{prefix}{i}")
    store.delete_key(key)


def _forget_arrivals(store, request: int, seen: int, world: int) -> None:
    """A request's arrival counter and slots, and the answers that came after the checker stopped
    waiting (those past `seen`): deleted."""
    count_key, _ = arrival_keys(request, 0)
    count = min(store.add(count_key, 0), seen + world)
    for i in range(seen + 1, count + 1):
        slot = arrival_keys(request, i)[1]
        value = store.get(slot) if store.check([slot]) else b""
        if value.isdigit() and len(value) < 10:
            key, prefix = answer_keys(request, int(value))
            if store.check([key]):
                try:
                    m = manifest(store.get(key), int(value), LOG_CAP)
                except BadManifest:
                    m = {"chunks": 0, "kind": None}
                chunks = m["chunks"]
                if m["kind"] is not None:
                    store.delete_key(kind_key(request, m["kind"]))
                _delete(store, key, prefix, chunks)
    for i in range(1, count + 1):
        store.delete_key(arrival_keys(request, i)[1])
    store.delete_key(count_key)


def _why_none(log: int, most: int) -> str:
    if log > most:
        return f"its log ({_mib(log)}) has no later segment that fits in the {_mib(most)} a rank sends"
    return "its log was empty" if log == 0 else "its log could not be read there"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"
