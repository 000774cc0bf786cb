"""Big clean runs for the benchmarks (bench_diff, bench_tui), written fast: one pre-packed body
per membership pattern instead of a LogWriter per record."""

from __future__ import annotations

import os

import msgpack

from ..logfile import format as lf
from ..logfile.records import site_record, string_record, tspec_record
from ..logfile.writer import open_exclusive
from .logs import _header
from .program import MAX, SUM, USER_FILE, Program


def write_clean_run(directory: str, world: int, n_events: int, groups=None, run_id: str = "bench",
                    wall_ns: int = 1_700_000_000_000_000_000) -> list[str]:
    """A clean run of `world` ranks with `n_events` collectives each, written fast.

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
        body = bodies.get(mine)
        if body is None:
            body = bodies[mine] = _bulk_body(pack, world, n_events, names, members, mine, body_ops)
        fd, path = open_exclusive(directory, f"rank-{rank:05d}.0")
        header = {**_header(Program(world, {}, [], run_id=run_id), rank, wall_ns)}
        data = lf.frame(pack(header), 0) + body
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.close(fd)
        paths.append(path)
    return paths


def _bulk_body(pack, world, n_events, names, members, mine, body_ops) -> bytes:
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
    for i, (_, t, _, _) in enumerate(body_ops):
        if t is not None:
            chunks.append(pack(tspec_record(i, [[sid(t[0]), list(t[1])]])))
    gids = {}
    for n in names:
        if n in mine:
            gids[n] = len(gids)
            chunks.append(pack({"k": lf.GROUP, "op": "seen", "gid": gids[n], "g": n, "d": "", "r": list(members[n])}))
        if n != "0":
            rec = {"k": lf.GROUP, "op": "new", "ts": 1, "r": list(members[n]), "s": len(body_ops), "m": n in mine}
            if n in mine:
                rec.update(gid=gids[n], g=n)
            chunks.append(pack(rec))
    chunks.append(pack({"k": lf.THREAD, "h": 0, "n": "MainThread", "id": 1}))
    ops = [sid(o) for o, _, _, _ in body_ops]
    sub = names[1:]
    n = 0
    seqs = dict.fromkeys(gids.values(), 0)
    chunks = [lf.frame(b"".join(chunks), 0)]  # one frame per collective below, as the recorder writes
    for j in range(n_events):
        g = sub[(j // 4) % len(sub)] if sub and j % 4 == 3 else "0"
        if g not in gids:
            continue
        b = j % len(body_ops)
        op, t, red, root = body_ops[b]
        ts = 100 * j
        rec = {"k": lf.COLL, "o": ops[b], "g": gids[g], "ts": ts, "j": seqs[gids[g]]}
        seqs[gids[g]] += 1
        if t is not None:
            rec["t"] = b
        rec["s"] = b
        if red is not None:
            rec["r"] = red
        if root is not None:
            rec["p"] = root
        if n:  # the previous collective's completion rides along, as the recorder writes it
            rec["d"] = [[1, 95, 60]]
        chunks.append(lf.frame(pack(rec), n))
        n += 1
    tail = pack({"k": lf.DONE, "i": n - 1, "r": 100 * n_events - 95, "c": 100 * n_events - 60}) if n else b""
    chunks.append(lf.frame(tail + pack({"k": lf.TRAILER, "ts": 100 * n_events + 1000, "wall_ns": 0}), n))
    return b"".join(chunks)
