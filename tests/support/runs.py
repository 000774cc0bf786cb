"""Runs written call by call for the unit tests: each rank's own list of calls, each completed or
not, each rank's log ended as the test says (a trailer: finished; none: killed). Written with
the recorder's LogWriter, as collcheck.synth writes its random programs."""

from __future__ import annotations

import os
from dataclasses import dataclass

from collcheck.knowledge import frames
from collcheck.logfile import format as lf
from collcheck.logfile.checkpoint import checkpoint_record, roll, signature
from collcheck.logfile.writer import LogWriter, open_exclusive
from collcheck.model import load_run

FILE = "/job/train.py"


@dataclass(frozen=True)
class Call:
    """One collective (or send/recv: `peer`, the group rank) as one rank issued it; `line` is its
    call site; `done`: completed; `error`: what it raised."""

    op: str = "allreduce_"
    group: str = "0"
    size: int = 4
    line: int = 10
    done: bool = True
    error: str | None = None
    peer: int | None = None
    reduce_op: int | None = 0
    role: str | None = None
    func: str = "train_step"
    splits: tuple | None = None  # all_to_all_single: (input split sizes, output split sizes)
    outer: tuple = ()  # the user's frames outside the call site, (file, line, function) outermost first
    file: str | None = None  # the call site's file (None: FILE)
    label: str | None = None  # what reports show it is for (None: its role)
    step_after: bool = False  # an optimizer step follows the call (an O record: a training step ends)


def calls(*specs, **common) -> list[Call]:
    """Calls from (op, size, line) tuples or Call objects, `common` fields on each."""
    out = []
    for s in specs:
        if isinstance(s, Call):
            out.append(s)
        else:
            op, size, line = s
            out.append(Call(op, size=size, line=line, **common))
    return out


def write(directory: str, groups: dict[str, tuple], ranks: dict[int, list[Call]], finished=None,
          raised: dict[int, str] | None = None, backend: str = "cpu:gloo", stopped: dict[int, int] | None = None,
          clock: dict[int, int] | None = None, sigterm=(), descs: dict[str, str] | None = None,
          checkpoint: bool = False):
    """One log per rank of `ranks`; `finished`: the ranks that exited cleanly (default: all);
    `raised`: rank -> the RuntimeError it raised at its last call's site; the others were killed
    where their calls end. `stopped`: rank -> an errno its writer met after its calls (LogWriter.stop:
    nothing written after). `clock`: rank -> µs its clock is ahead of the others'; `sigterm`: the
    ranks whose stacks faulthandler dumped beside the log at SIGTERM, in their last call; `descs`:
    group -> its group_desc (a DeviceMesh's: mesh_<dim>). Call sites in files that exist are
    fingerprinted as the recorder does (L records: size and mtime when first seen; the content hash
    of the program's files on the ranks that exit, finished or raising). `checkpoint`: the ranks that
    finish write their checkpoint before the trailer, as the recorder does (ranks that issued the
    same are then loaded by kinds: model/load.py). Returns the loaded Run."""
    raised = raised or {}
    stopped = stopped or {}
    clock = clock or {}
    descs = descs or {}
    world = len(groups["0"])
    finished = set(ranks) if finished is None else set(finished)
    for rank, rank_calls in ranks.items():
        fd, path = open_exclusive(directory, f"rank-{rank:05d}.0")
        w = LogWriter(fd, path)
        with w.lock:
            w.write({"k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "rank": rank, "world": world,
                     "run": "unit", "launch": "unit", "restart": 0, "host": "unit", "pid": 20000 + rank,
                     "backend": backend, "wall_ns": 1_700_000_000_000_000_000 + 1000 * clock.get(rank, 0),
                     "mono_ns": 0})
            gids: dict[str, int] = {}
            for name, members in groups.items():  # every rank creates every group, as torch needs
                rec = {"k": lf.GROUP, "op": "init" if name == "0" else "new", "ts": 0, "r": list(members),
                       "m": rank in members}
                if rank in members:
                    gids[name] = len(gids)
                    w.queue({"k": lf.GROUP, "op": "seen", "gid": gids[name], "g": name, "d": descs.get(name, ""),
                             "r": list(members)})
                    rec.update(gid=gids[name], g=name)
                w.write(rec)
            w.queue({"k": lf.THREAD, "h": 0, "n": "MainThread", "id": 1})
            seqs: dict = {}
            hashes: dict = {}
            for n, c in enumerate(rank_calls):
                ts = 100 * (n + 1)
                key = lf.seq_key(gids[c.group], c.op, c.peer)
                seqs[key] = j = seqs.get(key, -1) + 1
                reduce_op = c.reduce_op if c.reduce_op is not None and c.op.startswith(("allreduce", "reduce")) else None
                tensors = None if c.op == "barrier" else (("float32", (c.size,)),)
                hashes[key] = roll(hashes.get(key, 0), signature(c.op, tensors, reduce_op, c.peer, 0, c.role))
                rec = {"k": lf.COLL, "o": w.string_id(c.op), "g": gids[c.group], "ts": ts, "j": j,
                       "s": w.site_id(c.file or FILE, c.line, c.func)}
                if c.outer:
                    rec["ch"] = w.chain_id((*(w.site_id(*f) for f in c.outer), rec["s"]))
                if c.op != "barrier":
                    rec["t"] = w.tspec_id((("float32", (c.size,)),))
                if c.reduce_op is not None and c.op.startswith(("allreduce", "reduce")):
                    rec["r"] = c.reduce_op
                if c.peer is not None:
                    rec["p"] = c.peer
                if c.splits is not None:
                    rec["sp"] = [list(c.splits[0]), list(c.splits[1])]
                if c.role is not None:
                    rec["u"] = w.string_id(c.role)
                if c.label or c.role:
                    rec["l"] = w.string_id(c.label or c.role)
                w.write(rec, n)
                if c.error is not None:
                    w.queue({"k": lf.DONE, "i": n, "r": ts + 5, "e": c.error})
                elif c.done:
                    w.queue({"k": lf.DONE, "i": n, "r": ts + 5, "c": ts + 40})
                if c.step_after:
                    w.write({"k": lf.STEP, "ts": ts + 50})
            if rank in stopped:
                w.stop(OSError(stopped[rank], os.strerror(stopped[rank])))
            if rank in raised or rank in finished:  # record_exit: the program's files hashed at exit
                w.file_hashes(lambda path: frames.owner(path) == frames.USER)
            if rank in raised:
                last = rank_calls[-1]
                w.write({"k": lf.EXCEPTION, "t": "RuntimeError", "m": raised[rank], "ts": 100 * (len(rank_calls) + 1),
                         "s": w.site_id(last.file or FILE, last.line, last.func)})
            if rank in finished:
                if checkpoint:
                    open_eids = [n for n, c in enumerate(rank_calls) if not c.done and c.error is None]
                    failed = [n for n, c in enumerate(rank_calls) if c.error is not None]
                    w.write(checkpoint_record(len(rank_calls), [(k, j + 1, hashes[k]) for k, j in seqs.items()], "end",
                                              open_eids, failed, interned=w.vocabulary()))
                w.write({"k": lf.TRAILER, "ts": 100 * (len(rank_calls) + 2)})
        w.close()
        if rank in sigterm:
            last = rank_calls[-1]
            with open(path[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX, "w") as f:
                f.write(f"Current thread 0x00007f0000000001 (most recent call first):\n"
                        f'  File "{last.file or FILE}", line {last.line} in {last.func}\n')
    return load_run(directory)
