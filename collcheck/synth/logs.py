"""Writing a synthetic `Program` as one log per rank, faults applied, with the recorder's own
`LogWriter`, laid out exactly as `Recorder` lays them out."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..logfile import format as lf
from ..logfile.checkpoint import checkpoint_record, roll, signature
from ..logfile.records import header_record
from ..logfile.writer import LogWriter, open_exclusive
from .program import FAULT_KINDS, ROLE, SUM, USER_FILE, Op, Program, _mutate


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
    tag: int = 0
    chain: tuple = ()  # the user's frames above the site, outermost first


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
        e = _Ev(name, op.group, op.tensors, op.reduce_op, peer, site, op.role, op.label, op.native, ts,
                chain=op.chain(r))
        for k, v in kw.items():
            setattr(e, k, v)
        return e

    for i, op in enumerate(prog.ops):
        for r in prog.issuers(op):
            o = op
            skip = False
            tag = 0
            for f in faults:
                if f.index != i:
                    continue
                if f.kind == "missing" and f.rank == r:
                    skip = True
                elif f.kind == "unmatched_p2p" and r == op.dst:
                    skip = True
                elif f.kind == "tag_mismatch":
                    tag = 7 if r == op.dst else 0
                elif f.kind == "semantic_mismatch":
                    o = replace(o, role=None, label=None) if r == f.rank else replace(
                        o, role=ROLE, label=o.label or "DDP backward bucket 0", native=True)
                elif f.kind == "detour":
                    if f.rank == r:
                        o = replace(o, outer=((USER_FILE, 9500 + i, "main"), (USER_FILE, 9600, "visualise")),
                                    odd_outer=None)
                elif f.rank == r and f.kind not in ("extra", "order_mismatch"):
                    o = _mutate(prog, f.kind, o)
            if not skip:
                evs[r].append((i, ev(o, r, i * step + 10, tag=tag)))
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


def _header(prog: Program, rank: int, wall_ns: int, host: str = "synth") -> dict:
    return header_record(rank, prog.world, prog.run_id, torch="synthetic", python="3", backend="cpu:gloo",
                         launch=prog.run_id, restart=0, host=host, pid=10000 + rank, argv=[USER_FILE],
                         wall_ns=wall_ns, mono_ns=0, stack="site", hang_s=60.0)


def write_run(directory: str, prog: Program, faults=(), done: bool = True, trailer: bool = True,
              wall_ns: int = 1_700_000_000_000_000_000, hosts: dict | None = None,
              checkpoint: str | None = None) -> list[str]:
    """One log per rank (rank-00000.0.msgpack, ...) in `directory`; returns their paths. `hosts`:
    rank -> the host its header names (default "synth"). `checkpoint`: without a trailer, the logs
    end with a checkpoint written for this reason (a running rank's log as live mode's answer to
    a request ends it: "share")."""
    per_rank = rank_events(prog, faults)
    paths = []
    for rank in range(prog.world):
        fd, path = open_exclusive(directory, f"rank-{rank:05d}.0")
        w = LogWriter(fd, path)
        gids: dict[str, int] = {}
        with w.lock:
            w.write(_header(prog, rank, wall_ns, (hosts or {}).get(rank, "synth")))
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
            seqs: dict[int, int] = {}
            hashes: dict[int, int] = {}
            for n, e in enumerate(per_rank[rank]):
                key = lf.seq_key(gids[e.group], e.op, e.peer)
                seqs[key] = j = seqs.get(key, -1) + 1
                tensors = tuple(e.tensors) if e.tensors is not None and e.op != "barrier" else None
                hashes[key] = roll(hashes.get(key, 0), signature(e.op, tensors, e.reduce_op, e.peer, e.tag, e.role))
                rec = {"k": lf.COLL, "o": w.string_id(e.op), "g": gids[e.group], "ts": e.ts, "j": j}
                if e.tensors is not None and e.op != "barrier":
                    rec["t"] = w.tspec_id(tuple(e.tensors))
                rec["s"] = w.site_id(*e.site)
                if e.chain:
                    rec["ch"] = w.chain_id((*(w.site_id(*f) for f in e.chain), rec["s"]))
                if e.reduce_op is not None:
                    rec["r"] = e.reduce_op
                if e.peer is not None:
                    rec["p"] = e.peer
                if e.tag:
                    rec["tag"] = e.tag
                if e.native:
                    rec["a"] = 1
                    rec["n"] = 1
                if e.role is not None:
                    rec["u"] = w.string_id(e.role)
                    rec["l"] = w.string_id(e.label or e.role)
                w.write(rec, n)
                if done:
                    w.queue({"k": lf.DONE, "i": n, "r": e.ts + 5, "c": e.ts + 40})
            if trailer or checkpoint:  # (a rank that ends with a trailer wrote its checkpoint just before it)
                issued = len(per_rank[rank])
                sequences = [(k, j + 1, hashes[k]) for k, j in seqs.items()]
                w.write(checkpoint_record(issued, sequences, "end" if trailer else checkpoint,
                                          () if done else range(issued), interned=w.vocabulary()))
            if trailer:
                last = per_rank[rank][-1].ts if per_rank[rank] else 0
                w.write({"k": lf.TRAILER, "ts": last + 1000, "wall_ns": wall_ns + (last + 1000) * 1000})
        w.close()
        paths.append(path)
    return paths
