"""Big runs for the benchmarks (bench_diff, bench_tui), written fast: one pre-packed body per
membership pattern instead of a LogWriter per record. Clean, or with one rank out of step at one
slot (`Divergence`), the way a real job's bug puts it."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import msgpack

from ..logfile import format as lf
from ..logfile.checkpoint import (
    checkpoint_record,
    group_entry,
    roll,
    signature,
    vocabulary,
)
from ..logfile.records import site_record, string_record, tspec_record
from ..logfile.writer import open_exclusive
from .logs import _header
from .program import MAX, SUM, USER_FILE, Program


@dataclass(frozen=True)
class Divergence:
    """Rank `rank` out of step at collective `slot` of the world group: it skips it ("missing"),
    issues it with another shape ("shape") or issues one more before it ("extra")."""

    rank: int
    slot: int
    kind: str = "missing"


def write_clean_run(directory: str, world: int, n_events: int, groups=None, run_id: str = "bench",
                    wall_ns: int = 1_700_000_000_000_000_000, diverge: Divergence | None = None) -> list[str]:
    """A clean run of `world` ranks with `n_events` collectives each, written fast (with `diverge`:
    one rank out of step).

    The program is a training-loop-like body of 8 call sites repeated; groups (member
    lists) get every 4th collective, issued by their members. Ranks with the same
    memberships share one pre-packed body; each file is one header plus that body."""
    pack = msgpack.Packer(use_bin_type=True).pack
    groups = [tuple(sorted(g)) for g in (groups or [])]
    names = ["0"] + [str(i) for i in range(1, len(groups) + 1)]
    members = {"0": tuple(range(world)), **{n: g for n, g in zip(names[1:], groups)}}
    body_ops = [("allreduce_", ("float32", (4096,)), SUM, None), ("allreduce_", ("float32", (1024,)), SUM, None),
                ("broadcast_", ("float32", (16,)), None, 0), ("allreduce_", ("bfloat16", (256, 4)), MAX, None),
                ("allgather_", ("float32", (8,)), None, None), ("allreduce_", ("float32", (1,)), SUM, None),
                ("barrier", None, None, None), ("reduce_", ("float16", (64,)), SUM, 0)]
    bodies: dict[tuple, bytes] = {}
    paths = []
    for rank in range(world):
        mine = tuple(n for n in names if rank in members[n])
        odd = diverge if diverge is not None and diverge.rank == rank else None
        body = bodies.get((mine, odd))
        if body is None:
            body = bodies[(mine, odd)] = _bulk_body(pack, n_events, names, members, mine, body_ops, odd)
        fd, path = open_exclusive(directory, f"rank-{rank:05d}.0")
        header = {**_header(Program(world, {}, [], run_id=run_id), rank, wall_ns)}
        data = lf.frame(pack(header), 0) + body
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        paths.append(path)
    return paths


def _bulk_body(pack, n_events, names, members, mine, body_ops, odd: Divergence | None) -> bytes:
    mine = frozenset(mine)
    chunks = []
    strings: dict[str, int] = {}

    def sid(s):
        if s not in strings:
            strings[s] = len(strings)
            chunks.append(pack(string_record(strings[s], s)))
        return strings[s]

    f, fn = sid(USER_FILE), sid("train_step")
    for i in range(len(body_ops) + 1):
        chunks.append(pack(site_record(i, f, 100 + i, fn)))
    specs = [t for _, t, _, _ in body_ops] + [("float32", (777,))]  # (the last: a divergent shape)
    for i, t in enumerate(specs):
        if t is not None:
            chunks.append(pack(tspec_record(i, [[sid(t[0]), list(t[1])]])))
    gids = {}
    groups = hashlib.blake2b(digest_size=8)  # (the checkpoint's vocabulary, as LogWriter keeps it)
    for n in names:
        if n in mine:
            gids[n] = len(gids)
            rec = {"k": lf.GROUP, "op": "seen", "gid": gids[n], "g": n, "d": "", "r": list(members[n])}
            groups.update(group_entry(rec))
            chunks.append(pack(rec))
        if n != "0":
            rec = {"k": lf.GROUP, "op": "new", "ts": 1, "r": list(members[n]), "s": len(body_ops), "m": n in mine}
            if n in mine:
                rec.update(gid=gids[n], g=n)
            groups.update(group_entry(rec))
            chunks.append(pack(rec))
    chunks.append(pack({"k": lf.THREAD, "h": 0, "n": "MainThread", "id": 1}))
    ops = [sid(o) for o, _, _, _ in body_ops]
    chunks = [lf.frame(b"".join(chunks), 0)]  # one frame per collective below, as the recorder writes
    counts = dict.fromkeys(gids.values(), 0)
    hashes = dict.fromkeys(gids.values(), 0)
    n = 0
    for g, b, spec in _issued(n_events, names[1:], gids, body_ops, odd):
        op, t, red, root = body_ops[b]
        gid = gids[g]
        rec = {"k": lf.COLL, "o": ops[b], "g": gid, "ts": 100 * n, "j": counts[gid]}
        counts[gid] += 1
        hashes[gid] = roll(hashes[gid], signature(op, None if t is None else (specs[spec],), red, root))
        if t is not None:
            rec["t"] = spec
        rec["s"] = b
        if red is not None:
            rec["r"] = red
        if root is not None:
            rec["p"] = root
        if n:  # the previous collective's completion rides along, as the recorder writes it
            rec["d"] = [[1, 95, 60]]
        chunks.append(lf.frame(pack(rec), n))
        n += 1
    tail = pack({"k": lf.DONE, "i": n - 1, "r": 100 * n - 95, "c": 100 * n - 60}) if n else b""
    sequences = [(lf.seq_key(gid, "allreduce_", None), counts[gid], hashes[gid]) for gid in gids.values() if counts[gid]]
    sites = [(USER_FILE, 100 + i, "train_step") for i in range(len(body_ops) + 1)]
    tail += pack(checkpoint_record(n, sequences, "end", interned=vocabulary(strings, sites, (), groups.digest())))
    chunks.append(lf.frame(tail + pack({"k": lf.TRAILER, "ts": 100 * n + 1000, "wall_ns": 0}), n))
    return b"".join(chunks)


BODY_OPS = 8  # call sites of the loop body
BARRIER = 6  # the body's barrier: no tensor whose shape a "shape" divergence could change


def world_body_op(slot: int, subgrouped: bool) -> int:
    """The body op (call site) of the world group's collective `slot` (with subgroups every 4th
    collective goes to one of them)."""
    return (slot + slot // 3 if subgrouped else slot) % BODY_OPS


def _issued(n_events: int, subgroups: list, gids: dict, body_ops: list, odd: Divergence | None):
    """(group, body op, tensor spec) of each collective the rank issues, in order."""
    world_slot = 0
    for j in range(n_events):
        g = subgroups[(j // 4) % len(subgroups)] if subgroups and j % 4 == 3 else "0"
        if g not in gids:
            continue
        b = j % len(body_ops)
        spec = b
        if g == "0":
            if odd is not None and world_slot == odd.slot:
                if odd.kind == "missing":
                    world_slot += 1
                    continue
                if odd.kind == "extra":
                    yield g, 0, len(body_ops)
                elif odd.kind == "shape":
                    if body_ops[b][1] is None:
                        raise ValueError(f"collective {odd.slot} of the world group is a barrier: no shape to change")
                    spec = len(body_ops)
            world_slot += 1
        yield g, b, spec


def write_groups_run(directory: str, n_groups: int, calls: int = 1, world: int = 2, run_id: str = "bench-groups",
                     wall_ns: int = 1_700_000_000_000_000_000) -> list[str]:
    """A clean run of `world` ranks that creates `n_groups` groups of every rank, one after the
    other, each used by `calls` all-reduces right after its creation (a job that makes a group per
    layer, per step or per pair of ranks), laid out as the recorder writes it: a group's `seen`
    and `new` records in one frame, then one frame per collective."""
    pack = msgpack.Packer(use_bin_type=True).pack
    members = list(range(world))
    strings = {USER_FILE: 0, "train_step": 1, "allreduce_": 2, "float32": 3, "default_pg": 4}
    sites = [(USER_FILE, 100, "train_step"), (USER_FILE, 110, "train_step")]
    head = [pack(string_record(i, s)) for s, i in strings.items()]
    head += [pack(site_record(i, 0, line, 1)) for i, (_, line, _) in enumerate(sites)]
    head.append(pack(tspec_record(0, [[3, [1024]]])))
    digest = hashlib.blake2b(digest_size=8)
    world_rec = {"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "d": "default_pg", "r": members}
    init = {"k": lf.GROUP, "op": "init", "ts": 0, "gid": 0, "g": "0", "r": members, "d": "default_pg", "s": 0}
    for rec in (world_rec, init):
        digest.update(group_entry(rec))
        head.append(pack(rec))
    head.append(pack({"k": lf.THREAD, "h": 0, "n": "MainThread", "id": 1}))
    chunks = [lf.frame(b"".join(head), 0)]
    sig = signature("allreduce_", (("float32", (1024,)),), SUM, None)
    sequences = []
    n = 0
    for g in range(1, n_groups + 1):
        seen = {"k": lf.GROUP, "op": "seen", "gid": g, "g": str(g), "d": "", "r": members}
        new = {"k": lf.GROUP, "op": "new", "ts": 100 * n + 50, "gid": g, "g": str(g), "r": members, "s": 0, "us": 30}
        digest.update(group_entry(seen))
        digest.update(group_entry(new))
        chunks.append(lf.frame(pack(seen) + pack(new), n))
        h = 0
        for j in range(calls):
            rec = {"k": lf.COLL, "o": 2, "g": g, "ts": 100 * n + 60, "j": j, "t": 0, "s": 1, "r": SUM}
            if n:  # the previous collective's completion rides along, as the recorder writes it
                rec["d"] = [[1, 95, 60]]
            h = roll(h, sig)
            chunks.append(lf.frame(pack(rec), n))
            n += 1
        sequences.append((lf.seq_key(g, "allreduce_", None), calls, h))
    tail = pack({"k": lf.DONE, "i": n - 1, "r": 100 * n - 95, "c": 100 * n - 60}) if n else b""
    tail += pack(checkpoint_record(n, sequences, "end", interned=vocabulary(strings, sites, (), digest.digest())))
    chunks.append(lf.frame(tail + pack({"k": lf.TRAILER, "ts": 100 * n + 1000, "wall_ns": 0}), n))
    body = b"".join(chunks)
    paths = []
    for rank in range(world):
        fd, path = open_exclusive(directory, f"rank-{rank:05d}.0")
        data = lf.frame(pack(_header(Program(world, {}, [], run_id=run_id), rank, wall_ns)), 0) + body
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        paths.append(path)
    return paths
