"""Checkpoints: a rank's summary of everything it issued, so that thousands of identical ranks are
compared by their summaries and only one of each kind is read in full.

Per group (and per P2P channel: a `format.seq_key`) the recorder keeps a count and a rolling hash of
the signatures it issued (`signature`, `mix`: also what live mode publishes). A P record writes them
all down with the number of collectives written before it, the collectives not completed at that
moment and those that raised. It is written when the process ends (before the trailer or the
uncaught exception), when the watchdog finds a collective stuck, and when live mode sends the log
(capture/live/share.py): the moments a post-mortem or live mode's snapshot reads.

Reading them back is logfile/tail.py's. Standard library only: the recorder imports this.
"""

from __future__ import annotations

import hashlib

from . import format as lf
from .ops import P2P_OPS, SHAPE_FREE_OPS

MULT = 0x100000001B3  # the rolling hash: h = h * MULT + signature (mod 2**64)
MASK = (1 << 64) - 1
MAX_LISTED = 4096  # open or failed collectives a checkpoint lists; more: it says so (`"more": 1`)


def signature(opname: str, key, reduce_op, root, tag: int = 0, role: str | None = None, api: str | None = None) -> int:
    """A stable 64-bit hash (the same in every process: no `hash()`) of what every member of a group
    must agree on for one collective (the analysis' Signature): the op, tensor dtypes and shapes
    (dtypes alone for all-to-all, whose sizes may differ), reduce op and root, the purpose role of
    a torch internal, the public function when it is not the op's usual one (`api`); for a send or
    a recv, what its partner must agree on: tensors and tag. Computed once per template."""
    if key is not None and opname in SHAPE_FREE_OPS:
        key = tuple((d, ()) for d, _ in key)
    if opname in P2P_OPS:
        opname, root = "p2p", None
    fields = (opname, key, reduce_op, root, tag)
    if role is not None or api is not None:
        fields += (role, api)
    text = repr(fields).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def roll(h: int, sig: int) -> int:
    """One step of the rolling hash."""
    return (h * MULT + sig) & MASK


def vocabulary(strings, sites, chains, groups: bytes = b"") -> int:
    """A 64-bit hash of what a log interned: its strings (op and API names, labels, files,
    functions), call sites (file, line, function) and call chains (tuples of sites), and `groups`,
    a digest of its group records in order (names, members, creations). Ranks that issued the same
    signatures from other lines, through other chains, with other labels or on other groups (the
    rolling hashes are keyed by the log's own group ids) differ here."""
    h = hashlib.blake2b(groups, digest_size=8)
    for part in (strings, sites, chains):
        h.update(repr(sorted(repr(x) for x in part)).encode())
        h.update(b"\0")
    return int.from_bytes(h.digest(), "little")


GROUP_NOISE = ("ts", "us", "s")  # fields of a group record that differ between ranks of one kind


def group_entry(record: dict) -> bytes:
    """What a group record adds to the digest of a log's groups (`vocabulary`): its lasting fields."""
    return repr(sorted((k, v) for k, v in record.items() if k not in GROUP_NOISE)).encode()


def sizes_hash(gid: int, tensors, splits) -> int:
    """The sizes of an all_to_all_single (its tensors and split sizes), which its signature leaves
    out (they may differ per rank): rolled into a log's `sizes` in issue order."""
    return int.from_bytes(hashlib.blake2b(repr((gid, tensors, splits)).encode(), digest_size=8).digest(), "little")


def checkpoint_record(colls: int, sequences, why: str, open_eids=(), failed=(), interned: int = 0,
                      sizes: int = 0) -> dict:
    """A P record: `colls` collectives written before it; `sequences`: (seq_key, count, hash) of
    every group and channel; `why`: "end" (the process ends), "stuck" (the watchdog), "exception".
    `open_eids`: collectives not completed; `failed`: collectives that raised; `interned`: the
    log's `vocabulary`; `sizes`: the rolled `sizes_hash` of its all_to_all_singles."""
    rec = {"k": lf.CHECKPOINT, "n": colls, "c": sorted([k, n, h] for k, n, h in sequences), "w": why, "v": interned}
    if sizes:
        rec["a"] = sizes
    open_eids, failed = sorted(open_eids), sorted(failed)
    if open_eids:
        rec["o"] = open_eids[:MAX_LISTED]
    if failed:
        rec["x"] = failed[:MAX_LISTED]
    if len(open_eids) > MAX_LISTED or len(failed) > MAX_LISTED:
        rec["more"] = 1
    return rec
