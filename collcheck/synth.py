"""Synthetic runs in the real log format: random valid programs, injected faults, bulk benchmark runs.

Used by the property tests (tests/test_matcher_properties.py) and the benchmark
(`python -m collcheck.bench_diff`). Logs are written with the recorder's own
`LogWriter`, record by record, exactly as `Recorder` lays them out: header, interned
strings / sites / tensor specs, group records, `C` records, `D` records, trailer.

A `Program` is the ground truth: a list of `Op`s in global issue order. A collective op
is issued by every member of its group; a P2P op is a send on `src` (peer = the group
rank of `dst`) and a recv on `dst` (peer = the group rank of `src`). `write_run` turns
it into one log per rank, after applying `Fault`s to single ranks; `Fault.expect`
says which finding the analysis must report first.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import msgpack

from . import __version__, logformat as lf
from .capture.writer import LogWriter, open_exclusive

SUM, MIN, MAX = 0, 3, 4
USER_FILE = "/synth/train.py"
INTERNAL_FILE = "/synth/torch/nn/parallel/distributed.py"
ROLE = "gradient bucket"
# Sizes a program uses: all even, so `shape + 1` (the shape fault) is never one of them.
SIZES = (2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096)
DTYPES = ("float32", "bfloat16", "float16")  # never an integer dtype: the dtype fault makes one
# dtype fault: same element count, another dtype no program uses
DTYPE_SWAP = {"float32": "int32", "bfloat16": "int16", "float16": "int16"}
P2P = ("send", "recv_")
FAULT_KINDS = ("missing", "extra", "op_mismatch", "shape_mismatch", "dtype_mismatch", "reduce_op_mismatch",
               "root_mismatch", "order_mismatch", "unmatched_p2p", "semantic_mismatch")


@dataclass(frozen=True)
class Op:
    """One collective of the program (issued by every member of `group`) or one P2P message."""

    op: str  # wire op; "p2p" for a send/recv pair
    group: str
    tensors: tuple = ()  # ((dtype, shape), ...)
    reduce_op: int | None = None
    root: int | None = None  # group-local root of rooted ops
    site: int = 0  # index into Program.sites
    role: str | None = None
    label: str | None = None
    native: bool = False
    src: int | None = None  # P2P: global ranks
    dst: int | None = None
    recv_site: int = 0

    def key(self, role=...):
        """What the analysis compares (Signature minus api/tag, which the generator keeps default)."""
        return (self.op, self.tensors, self.reduce_op, self.root, self.role if role is ... else role)


@dataclass
class Program:
    world: int
    groups: dict  # name -> tuple of global ranks (group rank = index); "0" is the world
    sites: list  # [(file, line, function)]
    ops: list = field(default_factory=list)
    run_id: str = "synth"

    def members(self, name: str) -> tuple:
        return self.groups[name]

    def issuers(self, op: Op) -> tuple:
        if op.op == "p2p":
            return (op.src, op.dst)
        return self.groups[op.group]

    def group_sequence(self, name: str) -> list[int]:
        """Indices into ops of the group's collectives (not P2P), in issue order."""
        return [i for i, o in enumerate(self.ops) if o.group == name and o.op != "p2p"]

    def add_site(self, line: int | None = None, func: str = "train_step", file: str = USER_FILE) -> int:
        self.sites.append((file, line if line is not None else 100 + len(self.sites), func))
        return len(self.sites) - 1


# ----------------------------------------------------------------------------------------
# program generation


def _tensor(rng: random.Random, n: int = 1) -> tuple:
    out = []
    for _ in range(n):
        dt = rng.choice(DTYPES)
        shape = (rng.choice(SIZES),) if rng.random() < 0.7 else (rng.choice(SIZES[:5]), rng.choice(SIZES[:5]))
        out.append((dt, shape))
    return tuple(out)


def _template(rng: random.Random, prog: Program, group: str, p2p: bool, coalesced: bool) -> Op:
    members = prog.groups[group]
    kinds = ["allreduce_", "allreduce_", "broadcast_", "allgather_", "reduce_", "barrier", "bucket"]
    if coalesced:
        kinds.append("allreduce_coalesced_")
    if p2p and len(members) >= 2:
        kinds += ["p2p", "p2p"]
    kind = rng.choice(kinds)
    site = prog.add_site()
    if kind == "allreduce_":
        return Op("allreduce_", group, _tensor(rng), rng.choice((SUM, SUM, MAX)), site=site)
    if kind == "bucket":  # DDP's C++ reducer: native, async, with a purpose role
        return Op("allreduce_", group, _tensor(rng), SUM, site=site, role=ROLE, label="DDP backward bucket 0",
                  native=True)
    if kind == "allreduce_coalesced_":
        return Op("allreduce_coalesced_", group, _tensor(rng, rng.randint(2, 4)), SUM, site=site)
    if kind == "broadcast_":
        return Op("broadcast_", group, _tensor(rng), root=rng.randrange(len(members)), site=site)
    if kind == "reduce_":
        return Op("reduce_", group, _tensor(rng), SUM, root=rng.randrange(len(members)), site=site)
    if kind == "allgather_":
        (t,) = _tensor(rng)
        return Op("allgather_", group, (t,) * len(members), site=site)
    if kind == "barrier":
        return Op("barrier", group, (), site=site)
    src, dst = rng.sample(members, 2)
    return Op("p2p", group, _tensor(rng), site=site, src=src, dst=dst, recv_site=prog.add_site(func="recv_step"))


def generate_program(rng: random.Random, world: int, n_ops: int, groups=2, p2p: bool = True,
                     coalesced: bool = True) -> Program:
    """A valid program: a few one-off calls, then a loop body (reused call sites) run many times.

    groups: number of random subgroups, or a list of member lists. Subgroups are named
    "1", "2", ... like torch names them; their collectives are issued by members only."""
    prog = Program(world, {"0": tuple(range(world))}, [])
    if isinstance(groups, int):
        specs = []
        for _ in range(groups if world >= 2 else 0):
            size = rng.randint(2, world) if world > 2 else 2
            specs.append(sorted(rng.sample(range(world), size)))
    else:
        specs = [sorted(g) for g in groups]
    for i, members in enumerate(specs, 1):
        prog.groups[str(i)] = tuple(members)
    names = list(prog.groups)

    def any_template():
        return _template(rng, prog, rng.choice(names), p2p, coalesced)

    prologue = [any_template() for _ in range(rng.randint(0, 3))]
    body = [any_template() for _ in range(rng.randint(1, 6))]
    epilogue = [any_template() for _ in range(rng.randint(0, 2))]
    ops = list(prologue)
    while len(ops) < n_ops - len(epilogue):
        for t in body:
            if rng.random() < 0.1:  # a conditional call inside the loop (same on every rank)
                continue
            ops.append(t)
    ops = ops[: max(n_ops - len(epilogue), 0)] + epilogue
    prog.ops = ops
    return prog


# ----------------------------------------------------------------------------------------
# faults


class Expected(NamedTuple):
    kind: str
    group: str
    position: int
    ranks: list


@dataclass(frozen=True)
class Fault:
    """One rank deviates at program op `index` (see module docstring for the kinds).

    missing: `rank` skips op `index`; extra: `rank` issues an all_reduce from a new call
    site just before op `index` (index == len(ops): at the end) in group `group`;
    order_mismatch: `rank` swaps op `index` with the next collective of its group;
    unmatched_p2p: the receiver of P2P op `index` never posts the recv; semantic_mismatch:
    op `index` carries a purpose role on every rank but `rank`; the rest change one field
    of `rank`'s op `index`."""

    kind: str
    rank: int
    index: int
    group: str | None = None  # extra only

    def expect(self, prog: Program) -> Expected:
        if self.kind == "unmatched_p2p":
            op = prog.ops[self.index]
            return Expected("unmatched_p2p", op.group, _p2p_position(prog, self.index), sorted({op.src, op.dst}))
        if self.kind == "extra":
            group = self.group
            position = sum(1 for i in prog.group_sequence(group) if i < self.index)
        else:
            group = prog.ops[self.index].group
            position = prog.group_sequence(group).index(self.index)
        members = prog.groups[group]
        ranks = [self.rank]
        if len(members) == 2 and self.kind not in ("missing", "extra", "semantic_mismatch"):
            # no majority (align.py): a torch-internal call (one with a purpose role) is the
            # reference, else the lowest rank's; the other rank is blamed
            seq = prog.group_sequence(group)
            theirs = prog.ops[seq[position]]
            mine = prog.ops[seq[position + 1]] if self.kind == "order_mismatch" else theirs
            other = [r for r in members if r != self.rank][0]
            if (theirs.role is None) != (mine.role is None):
                ranks = [self.rank] if theirs.role is not None else [other]
            else:
                ranks = [max(members)]
        return Expected(self.kind, group, position, ranks)


def _p2p_messages(prog: Program, index: int) -> list[int]:
    op = prog.ops[index]
    return [i for i, o in enumerate(prog.ops) if o.op == "p2p" and (o.group, o.src, o.dst) == (op.group, op.src, op.dst)]


def _p2p_position(prog: Program, index: int) -> int:
    """With recv k dropped, recvs k+1.. pair with sends k..; the first send left alone is reported
    (all later messages of the pair have the same tensors: see fault_candidates)."""
    msgs = _p2p_messages(prog, index)
    return len(msgs) - 1


def _mutate(prog: Program, kind: str, op: Op) -> Op | None:
    """The culprit's version of `op` for a field fault, or None when the fault does not apply."""
    if op.op == "p2p":
        return None
    if kind == "op_mismatch":
        new = "_allgather_base_" if op.op != "_allgather_base_" else "allreduce_"
        return replace(op, op=new, reduce_op=None, root=None)
    if kind == "shape_mismatch":
        if not op.tensors:
            return None
        (dt, shape), *rest = op.tensors
        return replace(op, tensors=((dt, (shape[0] + 1,) + tuple(shape[1:])), *rest))
    if kind == "dtype_mismatch":
        if not op.tensors:
            return None
        return replace(op, tensors=tuple((DTYPE_SWAP[d], s) for d, s in op.tensors))
    if kind == "reduce_op_mismatch":
        if op.reduce_op is None:
            return None
        return replace(op, reduce_op=MIN)
    if kind == "root_mismatch":
        if op.op != "broadcast_":
            return None
        return replace(op, root=(op.root + 1) % len(prog.groups[op.group]))
    raise ValueError(kind)


def fault_candidates(prog: Program, kind: str) -> list[Fault]:
    """Every fault of `kind` whose first finding is unambiguous (see the comments)."""
    out = []
    ops = prog.ops
    if kind == "extra":
        for name, members in prog.groups.items():
            for r in members:
                # before any op of the program, or at the end
                for i in range(len(ops) + 1):
                    out.append(Fault("extra", r, i, name))
        return out
    if kind == "unmatched_p2p":
        for i, op in enumerate(ops):
            if op.op != "p2p":
                continue
            msgs = _p2p_messages(prog, i)
            k = msgs.index(i)
            # dropping recv k shifts the later recvs onto earlier sends: keep the pairs' tensors equal
            if all(ops[j].tensors == op.tensors for j in msgs[k:]):
                out.append(Fault("unmatched_p2p", op.dst, i))
        return out
    for name, members in prog.groups.items():
        seq = prog.group_sequence(name)
        keys = [ops[i].key() for i in seq]
        for p, i in enumerate(seq):
            op = ops[i]
            for r in members:
                if kind == "missing":
                    # the first difference is at p only if the next collective differs; the culprit
                    # must execute the call site elsewhere (else, with two members, it reads as the
                    # other rank's extra call)
                    if p + 1 < len(seq) and keys[p + 1] == keys[p]:
                        continue
                    if not any(o.site == op.site and j != i and r in prog.issuers(o) for j, o in enumerate(ops)):
                        continue
                    out.append(Fault(kind, r, i))
                elif kind == "order_mismatch":
                    if p + 1 < len(seq) and keys[p + 1] != keys[p]:
                        out.append(Fault(kind, r, i))
                elif kind == "semantic_mismatch":
                    if op.op == "allreduce_" and len(members) >= 2:
                        out.append(Fault(kind, r, i))
                else:
                    if _mutate(prog, kind, op) is not None and len(members) >= 2:
                        out.append(Fault(kind, r, i))
    return out


# ----------------------------------------------------------------------------------------
# writing


@dataclass
class _Ev:
    op: str
    group: str
    tensors: tuple | None
    reduce_op: int | None
    peer: int | None
    site: tuple
    role: str | None
    label: str | None
    native: bool
    ts: int


def rank_events(prog: Program, faults=()) -> dict[int, list[_Ev]]:
    """Each rank's events in issue order, faults applied."""
    step = 100  # µs between program ops
    evs: dict[int, list[tuple[int, _Ev]]] = {r: [] for r in range(prog.world)}  # (op index, event)
    faults = list(faults)
    for f in faults:
        if f.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {f.kind!r}")

    def ev(op: Op, r: int, ts: int, **kw) -> _Ev:
        members = prog.groups[op.group]
        peer = op.root
        site = prog.sites[op.site]
        name = op.op
        if op.op == "p2p":
            if r == op.src:
                name, peer = "send", members.index(op.dst)
            else:
                name, peer, site = "recv_", members.index(op.src), prog.sites[op.recv_site]
        e = _Ev(name, op.group, op.tensors, op.reduce_op, peer, site, op.role, op.label, op.native, ts)
        for k, v in kw.items():
            setattr(e, k, v)
        return e

    for i, op in enumerate(prog.ops):
        for r in prog.issuers(op):
            o = op
            skip = False
            for f in faults:
                if f.index != i:
                    continue
                if f.kind == "missing" and f.rank == r:
                    skip = True
                elif f.kind == "unmatched_p2p" and r == op.dst:
                    skip = True
                elif f.kind == "semantic_mismatch":
                    o = replace(o, role=None, label=None) if r == f.rank else replace(
                        o, role=ROLE, label=o.label or "DDP backward bucket 0", native=True)
                elif f.rank == r and f.kind not in ("extra", "order_mismatch"):
                    o = _mutate(prog, f.kind, o)
            if not skip:
                evs[r].append((i, ev(o, r, i * step + 10)))
    for f in faults:
        if f.kind == "extra":
            t = f.index * step - 50 + 10
            site = (USER_FILE, 9000 + f.index, "debug_only")
            e = _Ev("allreduce_", f.group, (("float32", (777,)),), SUM, None, site, None, None, False, t)
            lst = evs[f.rank]
            at = next((k for k, (j, _) in enumerate(lst) if j >= f.index), len(lst))
            lst.insert(at, (f.index, e))
        elif f.kind == "order_mismatch":
            group = prog.ops[f.index].group
            seq = prog.group_sequence(group)
            nxt = seq[seq.index(f.index) + 1]
            lst = evs[f.rank]
            a = next(k for k, (j, e) in enumerate(lst) if j == f.index and e.group == group)
            b = next(k for k, (j, e) in enumerate(lst) if j == nxt and e.group == group)
            ea, eb = lst[a][1], lst[b][1]
            ea.ts, eb.ts = eb.ts, ea.ts
            lst[a], lst[b] = (f.index, eb), (nxt, ea)  # the rank issues the later one first
    return {r: [e for _, e in lst] for r, lst in evs.items()}


def _header(prog: Program, rank: int, wall_ns: int) -> dict:
    return {
        "k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "collcheck": __version__, "torch": "synthetic",
        "python": "3", "backend": "cpu:gloo", "rank": rank, "world": prog.world, "run": prog.run_id,
        "launch": prog.run_id, "restart": 0, "host": "synth", "pid": 10000 + rank, "argv": [USER_FILE],
        "wall_ns": wall_ns, "mono_ns": 0, "stack": "site", "hang_s": 60.0,
    }


def write_run(directory: str, prog: Program, faults=(), done: bool = True, trailer: bool = True,
              wall_ns: int = 1_700_000_000_000_000_000) -> list[str]:
    """One log per rank (rank-00000.0.msgpack, ...) in `directory`; returns their paths."""
    per_rank = rank_events(prog, faults)
    paths = []
    for rank in range(prog.world):
        fd, path = open_exclusive(directory, f"rank-{rank:05d}.0")
        w = LogWriter(fd, path)
        gids: dict[str, int] = {}
        with w.lock:
            w.write(_header(prog, rank, wall_ns))
            init_site = w.site_id(USER_FILE, 10, "main")
            gids["0"] = 0
            w.queue({"k": lf.GROUP, "op": "seen", "gid": 0, "g": "0", "d": "default_pg", "r": list(prog.groups["0"])})
            w.write({"k": lf.GROUP, "op": "init", "ts": 0, "gid": 0, "g": "0", "r": list(prog.groups["0"]),
                     "d": "default_pg", "s": init_site})
            for line, (name, members) in enumerate(prog.groups.items(), 20):
                if name == "0":
                    continue
                site = w.site_id(USER_FILE, line, "main")
                rec = {"k": lf.GROUP, "op": "new", "ts": 1, "r": list(members), "s": site, "m": rank in members}
                if rank in members:
                    gids[name] = len(gids)
                    w.queue({"k": lf.GROUP, "op": "seen", "gid": gids[name], "g": name, "d": "", "r": list(members)})
                    rec.update(gid=gids[name], g=name)
                w.write(rec)
            w.queue({"k": lf.THREAD, "h": 0, "n": "MainThread", "id": 1})
            for n, e in enumerate(per_rank[rank]):
                rec = {"k": lf.COLL, "o": w.string_id(e.op), "g": gids[e.group], "ts": e.ts}
                if e.tensors is not None and e.op != "barrier":
                    rec["t"] = w.tspec_id(tuple(e.tensors))
                rec["s"] = w.site_id(*e.site)
                if e.reduce_op is not None:
                    rec["r"] = e.reduce_op
                if e.peer is not None:
                    rec["p"] = e.peer
                if e.native:
                    rec["a"] = 1
                    rec["n"] = 1
                if e.role is not None:
                    rec["u"] = w.string_id(e.role)
                    rec["l"] = w.string_id(e.label or e.role)
                w.write(rec)
                if done:
                    w.queue({"k": lf.DONE, "i": n, "r": e.ts + 5, "c": e.ts + 40})
            if trailer:
                last = per_rank[rank][-1].ts if per_rank[rank] else 0
                w.write({"k": lf.TRAILER, "ts": last + 1000, "wall_ns": wall_ns + (last + 1000) * 1000})
        w.close()
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------------------
# bulk writer for the benchmark


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
        data = pack(header) + body
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
            chunks.append(pack({"k": lf.STRING, "i": strings[s], "s": s}))
        return strings[s]

    f, fn = sid(USER_FILE), sid("train_step")
    for i in range(len(body_ops) + 1):
        chunks.append(pack({"k": lf.SITE, "i": i, "f": f, "l": 100 + i, "n": fn}))
    for i, (_, t, _, _) in enumerate(body_ops):
        if t is not None:
            chunks.append(pack({"k": lf.TSPEC, "i": i, "t": [[sid(t[0]), list(t[1])]]}))
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
    for j in range(n_events):
        g = sub[(j // 4) % len(sub)] if sub and j % 4 == 3 else "0"
        if g not in gids:
            continue
        b = j % len(body_ops)
        op, t, red, root = body_ops[b]
        ts = 100 * j
        rec = {"k": lf.COLL, "o": ops[b], "g": gids[g], "ts": ts}
        if t is not None:
            rec["t"] = b
        rec["s"] = b
        if red is not None:
            rec["r"] = red
        if root is not None:
            rec["p"] = root
        chunks.append(pack(rec))
        chunks.append(pack({"k": lf.DONE, "i": n, "r": ts + 5, "c": ts + 40}))
        n += 1
    chunks.append(pack({"k": lf.TRAILER, "ts": 100 * n_events + 1000, "wall_ns": 0}))
    return b"".join(chunks)
