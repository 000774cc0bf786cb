"""PyTorch Flight Recorder dumps as collcheck logs: one log per rank, written with the recorder's
own LogWriter into a cache directory, so that the matcher, every report, the TUI and replay read
them as they read a recorded run.

What a dump holds and lacks (../docs/flight-recorder.md): per entry the group, its per-group
sequence number (`collective_seq_id`; P2P ops count `p2p_seq_id`), the op and backend
(`profiling_name`, "nccl:all_reduce"), input/output sizes and dtypes, state, creation time,
thread and Python frames. No reduce op, no root of a broadcast/reduce/gather/scatter, no tag;
gloo records no P2P op. A rank keeps only its last N entries (a ring buffer), and ranks wrap at
different points: each group's records carry their sequence numbers (`j`), and a rank whose
buffer wrapped is written as a capped log whose oldest segment was deleted, so that the model
aligns every group from the first sequence number all its members still hold.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field

from .. import __version__
from .. import logformat as lf
from ..capture.writer import LogWriter, open_exclusive
from ..reader import LogError
from .fr_entries import (
    COALESCED,
    FR_OPS,
    SYMMETRIC,
    backend_of,
    blocks_of,
    group_of,
    op_of,
    peer_of,
    seq_of,
    site_of,
    tensors_of,
    usual_api,
)
from .fr_load import load_dump, sniff

CONVERTER = 7  # bump when the conversion changes: cached conversions are redone
_RANK_IN_NAME = re.compile(r"(\d+)$")


@dataclass
class Dumps:
    """One run's dumps: rank -> (path, dump)."""

    by_rank: dict[int, tuple[str, dict]]
    notes: list[str] = field(default_factory=list)


def find_dumps(target: str) -> list[str]:
    """The Flight Recorder dumps under `target` (a file or a directory), by content; [] when it
    holds collcheck logs or no dump."""
    if os.path.isfile(target):
        return [target] if sniff(target) else []
    if not os.path.isdir(target):
        return []
    found, logs = [], False
    for root, _dirs, files in os.walk(target):
        for name in sorted(files):
            if name.endswith(lf.LOG_SUFFIX):
                logs = True
            elif sniff(os.path.join(root, name)):
                found.append(os.path.join(root, name))
    return [] if logs else sorted(found)


def resolve(target):
    """What load_run reads for `target` (a directory or a list of files): unchanged when it is
    collcheck logs, else the directory of logs converted from the Flight Recorder dumps in it."""
    if isinstance(target, str):
        paths = find_dumps(target)
    else:
        paths = [p for p in target if os.path.isfile(p) and sniff(p)]
        paths = paths if len(paths) == len(target) else []
    return convert(paths) if paths else target


def convert(paths: list[str], cache: str | None = None) -> str:
    """Convert the dumps (one per rank) once; the directory of their logs (cached by content)."""
    digest = hashlib.sha1(f"{CONVERTER} {__version__}".encode())
    for p in paths:
        with open(p, "rb") as f:
            digest.update(os.path.basename(p).encode() + b"\0" + f.read())
    root = cache or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "collcheck", "fr")
    out = os.path.join(root, digest.hexdigest()[:20])
    if os.path.exists(os.path.join(out, "done")):
        return os.path.join(out, "run")
    dumps = _rank_dumps(paths)
    tmp = f"{out}.tmp{os.getpid()}"
    run_dir = os.path.join(tmp, "run")
    os.makedirs(run_dir, exist_ok=True)
    _write_logs(dumps, run_dir)
    with open(os.path.join(tmp, "done"), "w") as f:
        json.dump({"sources": [os.path.abspath(p) for p in paths]}, f)
    try:
        os.rename(tmp, out)
    except OSError:  # another process converted the same dumps meanwhile
        pass
    return os.path.join(out, "run")


def _rank_dumps(paths: list[str]) -> Dumps:
    """Each dump's rank, from the trailing digits of its name (as torch names them:
    `<TORCH_FR_DUMP_TEMP_FILE><rank>`; a dump does not hold its rank)."""
    by_rank: dict[int, tuple[str, dict]] = {}
    for p in paths:
        m = _RANK_IN_NAME.search(os.path.basename(p))
        if m is None:
            raise LogError(f"{p}: cannot tell which rank wrote this Flight Recorder dump (torch names them "
                           f"<prefix><rank>, e.g. comm_lib_trace_rank_0)")
        rank = int(m.group(1))
        if rank in by_rank:
            raise LogError(f"two Flight Recorder dumps for rank {rank}: {by_rank[rank][0]} and {p}; "
                           "pass the dumps of one run")
        by_rank[rank] = (p, load_dump(p))
    empty = sorted(r for r, (_, d) in by_rank.items() if not d.get("entries"))
    if len(empty) == len(by_rank):
        raise LogError(f"no entries in any of the {len(by_rank)} Flight Recorder dumps: dumped after "
                       "destroy_process_group, with the recorder off (TORCH_FR_BUFFER_SIZE=0), or a gloo job "
                       "that only sent and received (gloo records no send/recv)")
    notes = [(f"rank(s) {', '.join(map(str, empty))}: the Flight Recorder dump holds no entries (dumped after "
              "destroy_process_group, or with the recorder off): not checked")] if empty else []
    return Dumps(by_rank, notes)


# ------------------------------------------------------------------------------------------------
# groups
# ------------------------------------------------------------------------------------------------

def _parse_ranks(text) -> tuple | None:
    if isinstance(text, (list, tuple)):
        ranks = text
    else:
        try:
            ranks = json.loads(text)
        except (TypeError, ValueError):
            return None
    if not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks):
        return None
    return tuple(ranks)


def group_members(dumps: Dumps) -> tuple[dict[str, tuple], dict[str, str], bool]:
    """group name -> global ranks, group name -> description, and whether the membership had to
    be reconstructed from the entries (torch 2.13's gloo writes every group's `pg_config` under
    one empty name, before the group has one)."""
    members: dict[str, set] = {}
    descs: dict[str, str] = {}
    broken = False
    for _path, dump in dumps.by_rank.values():
        config = dump.get("pg_config") or {}
        if not isinstance(config, dict) or "" in config:
            broken = True
            continue
        for name, info in config.items():
            ranks = _parse_ranks(info.get("ranks")) if isinstance(info, dict) else None
            if ranks is not None and ranks:
                members.setdefault(str(name), set()).update(ranks)
                descs.setdefault(str(name), str(info.get("desc", "")))
    world = max(dumps.by_rank) + 1
    for rank, (_path, dump) in dumps.by_rank.items():
        for e in dump.get("entries", []):
            name, desc = group_of(e)
            if name not in members or broken:
                members.setdefault(name, set()).add(rank)
                descs.setdefault(name, desc)
    if "0" in members:  # the default group holds every rank
        members["0"] |= set(range(world))
    return {n: tuple(sorted(r)) for n, r in members.items()}, descs, broken


# ------------------------------------------------------------------------------------------------
# logs
# ------------------------------------------------------------------------------------------------

@dataclass
class _RunFacts:
    """What every rank's log needs from all the dumps."""

    world: int
    members: dict[str, tuple]  # group -> global ranks
    descs: dict[str, str]
    base: int  # ns: the earliest entry, origin of every `ts`
    notes: list[str]  # the report's warnings: what this input cannot support
    joined: set[tuple]  # (group, sequence number) of gloo collectives every member joined
    pg_names: dict[str, str]  # pg_id -> group, where every rank holding that pg_id agrees
    last_j: dict[str, int]  # group -> the largest `j` any rank kept
    seq_base: dict[str, int]  # group -> its first sequence number: 1 as torch counts, 0 if one is 0


def _write_logs(dumps: Dumps, run_dir: str) -> None:
    members, descs, broken = group_members(dumps)
    entries = [(rank, e) for rank, (_, d) in dumps.by_rank.items() for e in d.get("entries", [])]
    times = [e.get("time_created_ns") for _, e in entries]
    names: dict[str, set] = {}
    last_j: dict[str, int] = {}
    base = {group_of(e)[0]: 1 for _, e in entries}
    base.update({group_of(e)[0]: 0 for _, e in entries if not e.get("is_p2p") and seq_of(e) == 0})
    for _, e in entries:
        names.setdefault(str(e.get("pg_id")), set()).add(group_of(e)[0])
        if not e.get("is_p2p"):
            g = group_of(e)[0]
            last_j[g] = max(last_j.get(g, -1), seq_of(e) - base[g])
    facts = _RunFacts(
        world=max([max(dumps.by_rank) + 1] + [max(r) + 1 for r in members.values() if r]),
        members=members, descs=descs,
        base=min((t for t in times if isinstance(t, int) and t > 0), default=0),
        notes=dumps.notes + _gaps(dumps, broken, members), joined=_joined_everywhere(dumps),
        pg_names={i: next(iter(n)) for i, n in names.items() if len(n) == 1}, last_j=last_j, seq_base=base)
    for rank, (path, dump) in sorted(dumps.by_rank.items()):
        _RankWriter(rank, path, dump, facts).write(run_dir)


def _completed_by_counter(dump: dict, entry: dict) -> bool:
    """The entry's group counters (`pg_status`, keyed by this process's pg_id) say it completed."""
    status = (dump.get("pg_status") or {}).get(str(entry.get("pg_id")))
    done = status.get("last_completed_collective") if isinstance(status, dict) else None
    return isinstance(done, int) and seq_of(entry) <= done


def _joined_everywhere(dumps: Dumps) -> set[tuple]:
    """(group, sequence number) of the gloo collectives that completed on some rank and complete
    only once every member joined: gloo marks nothing completed, and its counters are updated
    after the op returns, so a rank dumped right after one may not count it yet."""
    out = set()
    for _path, dump in dumps.by_rank.values():
        for e in dump.get("entries", []):
            if (backend_of(e) == "gloo" and not e.get("is_p2p") and op_of(e)[0] in SYMMETRIC
                    and _completed_by_counter(dump, e)):
                out.add((group_of(e)[0], e.get("collective_seq_id")))
    return out


def _gaps(dumps: Dumps, broken: bool, members: dict[str, tuple]) -> list[str]:
    """The checks this input cannot support, said in the report instead of implied passed."""
    notes = [("read from PyTorch Flight Recorder dumps: they record no reduce op, no root of "
              "broadcast/reduce/gather/scatter, no tag, no all_to_all split sizes and no purpose (DDP "
              "buckets, join), so those were not compared")]
    backends = {backend_of(e) for _, d in dumps.by_rank.values() for e in d.get("entries", [])}
    if "gloo" in backends:
        notes.append("gloo's Flight Recorder records no send/recv: point-to-point ops were not checked, and "
                     "it marks every op 'scheduled' and updates its counters late: completion is known only "
                     "where the counters or a peer show it")
    if broken:
        notes.append("the dumps' group table (pg_config) is broken, as torch 2.13 writes it on gloo: group "
                     "members were reconstructed from the ranks whose entries use each group")
        alone = sorted((n for n, r in members.items() if len(r) == 1 and n != "0"), key=_group_order)
        if alone:
            notes.append(f"group(s) {', '.join(alone)}: only one rank's entries use each, so nothing of them "
                         "could be compared (their other members, if any, are not known)")
    return notes


class _RankWriter:
    """One rank's dump as one collcheck log."""

    def __init__(self, rank: int, path: str, dump: dict, facts: _RunFacts):
        self.rank, self.path, self.dump, self.facts = rank, path, dump, facts
        self.world, self.members, self.descs, self.base = facts.world, facts.members, facts.descs, facts.base
        # this process's pg_id -> group name (pg_id counts the groups a process joined, in order)
        self.pg_names = dict(facts.pg_names, **{str(e.get("pg_id")): group_of(e)[0] for e in dump.get("entries", [])})
        self.gids: dict[str, int] = {}
        self.threads: dict[tuple, int] = {}
        self.p2p: dict[int, int] = {}  # seq_key -> last `j` of that P2P channel
        self.notes = list(facts.notes)  # the report's warnings, this rank's own added

    def write(self, run_dir: str) -> None:
        entries = sorted(self.dump.get("entries", []), key=lambda e: e.get("record_id", 0))
        blocks = blocks_of(entries)
        fd, path = open_exclusive(run_dir, f"rank-{self.rank:05d}.0")
        w = LogWriter(fd, path, max_bytes=1 << 40)  # segments, never deleted: a wrapped buffer is one
        wrapped = bool(entries) and int(entries[0].get("record_id", 0) or 0) > 0  # entries before it went
        last = self._counts_before(blocks) if wrapped else None
        with w.lock:
            w.write(self._header())
            for name in sorted(self._groups_used(entries), key=_group_order):
                self._group(w, name)
            if last is not None:
                self._wrapped(w, last)
            for eid, block in enumerate(blocks):
                self._record(w, eid, block)
        w.close()

    def _header(self) -> dict:
        backends = sorted({backend_of(e) for e in self.dump.get("entries", [])} - {""})
        return {
            "k": lf.HEADER, "magic": lf.MAGIC, "v": lf.FORMAT_VERSION, "collcheck": __version__,
            "torch": f"flight recorder {self.dump.get('version')}", "python": "?",
            "backend": ",".join(backends) or "?", "rank": self.rank, "world": self.world, "run": "flight-recorder",
            "launch": "", "restart": 0, "host": "?", "pid": 0, "argv": [self.path], "wall_ns": self.base,
            "mono_ns": 0, "stack": "full", "hang_s": 0.0, "source": "flight-recorder", "notes": self.notes,
        }

    def _groups_used(self, entries) -> set[str]:
        names = {group_of(e)[0] for e in entries}
        return names | {n for n, r in self.members.items() if self.rank in r}

    def _group(self, w: LogWriter, name: str) -> None:
        ranks = list(self.members.get(name, ()))
        gid = self.gids[name] = len(self.gids)
        desc = self.descs.get(name, "")
        # no init/new records: a dump does not say where or in which order groups were created
        w.keep({"k": lf.GROUP, "op": "seen", "gid": gid, "g": name, "d": desc, "r": ranks})

    def _counts_before(self, blocks) -> dict[str, int]:
        """group -> the last `j` before the first collective this wrapped buffer kept: from the
        first kept entry's sequence number, or, for a group with none kept, from its counters
        (`pg_status`: how many collectives the group had enqueued)."""
        last: dict[str, int] = {}
        for b in blocks:
            e = b[0]
            if not e.get("is_p2p"):
                g = group_of(e)[0]
                last.setdefault(g, seq_of(e) - self.facts.seq_base.get(g, 1) - 1)
        for pg_id, status in (self.dump.get("pg_status") or {}).items():
            name = self.pg_names.get(str(pg_id))
            enqueued = status.get("last_enqueued_collective") if isinstance(status, dict) else None
            if name is not None and name not in last and isinstance(enqueued, int) and enqueued > 0:
                last[name] = enqueued - 1
        for name, ranks in self.members.items():  # nothing kept and no counter known: not checked
            if self.rank in ranks and name not in last and name in self.facts.last_j:
                last[name] = self.facts.last_j[name]
                self.notes.append(f"group {name}: not checked: rank {self.rank}'s wrapped buffer kept none of its "
                                  "collectives and its counters do not say how many it had")
        return last

    def _wrapped(self, w: LogWriter, last: dict[str, int]) -> None:
        """The buffer wrapped: go on as a capped log whose segment 1 was deleted, with the
        counters of every group (the reader drops nothing and aligns groups by them)."""
        for name in last:
            if name not in self.gids:
                self._group(w, name)
        counters = [[self.gids[n] << 34, j] for n, j in last.items() if j >= 0]
        w.snapshot_records = lambda: [{"k": lf.COUNTERS, "c": counters}]
        w.next_segment()
        w.next_segment()
        os.unlink(f"{w.path}.1")

    def _thread(self, w: LogWriter, e: dict) -> int:
        key = (e.get("thread_id"), e.get("thread_name"))
        h = self.threads.get(key)
        if h is None:
            h = self.threads[key] = len(self.threads)
            ident = key[0]
            try:
                ident = int(ident)
            except (TypeError, ValueError):
                ident = 0
            w.keep({"k": lf.THREAD, "h": h, "n": str(key[1] or "?"), "id": ident})
        return h

    def _record(self, w: LogWriter, eid: int, block: list[dict]) -> None:
        e = block[0]
        name, meta = op_of(e)
        wire, api, _ = FR_OPS.get(name, (name, name, "in"))
        if len(block) > 1 and wire in COALESCED:
            wire, api = COALESCED[wire]
        group = group_of(e)[0]
        gid = self.gids.get(group)
        if gid is None:
            self._group(w, group)
            gid = self.gids[group]
        ts = max(0, (int(e.get("time_created_ns", 0) or 0) - self.base) // 1000)
        rec = {"k": lf.COLL, "o": w.string_id(wire), "g": gid, "ts": ts}
        if e.get("is_p2p"):
            peer = peer_of(name, meta)
            key = lf.seq_key(gid, wire, peer)
            rec["j"] = self.p2p[key] = self.p2p.get(key, -1) + 1
            if peer is not None:
                rec["p"] = peer
        else:
            rec["j"] = max(seq_of(e) - self.facts.seq_base.get(group, 1), 0)
        tensors = ()
        for part in block:
            t = tensors_of(part, FR_OPS.get(op_of(part)[0], (None, None, "in"))[2])
            tensors += t or ()
        if tensors and wire != "barrier":
            rec["t"] = w.tspec_id(tensors)
        site, chain = site_of(e.get("frames"))
        if site is not None:
            rec["s"] = w.site_id(*site)
        if len(chain) > 1:
            rec["st"] = [w.site_id(*f) for f in chain]
        h = self._thread(w, e)
        if h:
            rec["h"] = h
        if api != usual_api(wire):
            rec["x"] = w.string_id(api)
        if backend_of(e) != "gloo":
            rec["a"] = 1  # NCCL and the like: every op returns at once, enqueued on a stream
        w.write(rec, eid)
        if self._completed(e):
            done = e.get("time_discovered_completed_ns")
            c = ts if not isinstance(done, int) or done <= 0 else max(ts, (done - self.base) // 1000)
            w.done(eid, ts, c)
        elif rec.get("a") or backend_of(e) == "gloo":
            # NCCL: enqueued, not known to be done. gloo: its counters lag behind the op's return
            # (a clean run's last collectives often read as not completed): returned, completion
            # unknown, never taken for where the rank waits
            w.done(eid, ts, None)

    def _completed(self, e: dict) -> bool:
        if e.get("state") == "completed":
            return True
        if e.get("is_p2p"):
            return False
        return _completed_by_counter(self.dump, e) or (group_of(e)[0], e.get("collective_seq_id")) in self.facts.joined


def _group_order(name: str):
    return (0, int(name)) if name.isdigit() else (1, name)


