"""One rank's Flight Recorder dump written as one collcheck log (convert.py drives it): its
groups, its collectives with their sequence numbers, completions and call chains, and, when its
ring buffer wrapped, the segment gap and counters that let the model align it with the others.
It ends with the checkpoint (P record) convert.py computed from the rank's summary (summary.py),
and the gloo collectives whose completion is unknown after it: what model/load.py compares to
tell ranks of one kind."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...logfile import format as lf
from ...logfile.records import header_record
from ...logfile.writer import LogWriter, open_exclusive
from .entries import (
    COALESCED,
    FR_OPS,
    backend_of,
    blocks_of,
    group_of,
    group_order,
    op_of,
    peer_of,
    seq_of,
    site_of,
    tensors_of,
    usual_api,
)

LOG_NAME = "rank-{rank:05d}.0"  # a converted log's name in the run directory (before the suffix)


@dataclass
class RunFacts:
    """What every rank's log needs from all the dumps."""

    world: int
    members: dict[str, tuple]  # group -> global ranks
    descs: dict[str, str]
    base: int  # ns: the earliest entry, origin of every `ts`
    notes: list[str]  # the report's warnings: what this input cannot support
    unchecked: list[str]  # ranks or groups that nothing could be compared in (the verdict says so)
    joined: set[tuple]  # (group, sequence number) of gloo collectives every member joined
    pg_names: dict[str, str]  # pg_id -> group, where every rank holding that pg_id agrees
    last_j: dict[str, int]  # group -> the largest `j` any rank kept
    seq_base: dict[str, int]  # group -> its first sequence number: 1 as torch counts, 0 if one is 0
    gids: dict[str, int]  # group -> its gid in every rank's log (one numbering for the run: a
    # checkpoint's sequence keys then tell ranks of different groups apart)
    member_of: dict[int, set] = field(default_factory=dict)  # rank -> the groups it is a member of


@dataclass
class RankPlan:
    """What convert.py decided of a rank's log from its summary: its checkpoint record, the
    collectives not completed, and those of them whose completion is unknown (gloo: returned)."""

    checkpoint: dict
    open: frozenset
    unconfirmed: tuple


def rank_header(rank: int, path: str, version: str, backends, facts: RunFacts, unchecked: list,
                p2p_unnumbered: bool) -> dict:
    """A converted log's header: `backends` those of the rank's entries."""
    return header_record(
        rank, facts.world, "flight-recorder", torch=f"flight recorder {version}", python="?",
        backend=",".join(sorted(set(backends) - {""})) or "?", launch="", restart=0, host="?", pid=0, argv=[path],
        wall_ns=facts.base, mono_ns=0, stack="full", hang_s=0.0, source="flight-recorder", notes=list(facts.notes),
        unchecked=unchecked, p2p_unnumbered=p2p_unnumbered)


class RankWriter:
    """One rank's dump as one collcheck log."""

    def __init__(self, rank: int, path: str, dump: dict, facts: RunFacts, plan: RankPlan):
        self.rank, self.path, self.dump, self.facts, self.plan = rank, path, dump, facts, plan
        self.world, self.members, self.descs, self.base = facts.world, facts.members, facts.descs, facts.base
        # this process's pg_id -> group name (pg_id counts the groups a process joined, in order)
        self.pg_names = dict(facts.pg_names)
        self.pg_names.update((e["pg_id"], group_of(e)[0]) for e in dump["entries"] if e["pg_id"] is not None)
        self.gids: dict[str, int] = {}
        self.threads: dict[tuple, int] = {}
        self.p2p: dict[int, int] = {}  # seq_key -> last `j` of that P2P channel
        self.unconfirmed = frozenset(plan.unconfirmed)
        self.unchecked = list(facts.unchecked)
        self.p2p_unnumbered = False  # wrapped, with P2P entries: their per-peer numbers are not known

    def write(self, run_dir: str) -> str:
        """The log's path (its first file: a wrapped buffer's goes on in `<path>.2`)."""
        entries = sorted(self.dump["entries"], key=lambda e: e["record_id"])
        blocks = blocks_of(entries)
        if len(blocks) != self.plan.checkpoint["n"]:
            raise AssertionError(f"rank {self.rank}: {len(blocks)} collectives, its summary counted "
                                 f"{self.plan.checkpoint['n']}")
        fd, path = open_exclusive(run_dir, LOG_NAME.format(rank=self.rank))
        w = LogWriter(fd, path, max_bytes=1 << 40)  # segments, never deleted: a wrapped buffer is one
        wrapped = bool(entries) and entries[0]["record_id"] > 0  # entries before it went
        last = self._counts_before(blocks) if wrapped else None
        self.p2p_unnumbered = wrapped and any(e["is_p2p"] for e in entries)
        with w.lock:
            w.write(self._header())
            for name in sorted(self._groups_used(entries), key=group_order):
                self._group(w, name)
            if last is not None:
                self._wrapped(w, last)
            unknown = []  # D records of the collectives whose completion is unknown: after the checkpoint
            for eid, block in enumerate(blocks):
                unknown += self._record(w, eid, block)
            w.write(self.plan.checkpoint)
            for rec in unknown:
                w.queue(rec)
            w.write()
        w.close()
        return path

    def _header(self) -> dict:
        return rank_header(self.rank, self.path, self.dump["version"], {backend_of(e) for e in self.dump["entries"]},
                           self.facts, self.unchecked, self.p2p_unnumbered)

    def _groups_used(self, entries) -> set[str]:
        names = {group_of(e)[0] for e in entries}
        return names | {n for n, r in self.members.items() if self.rank in r}

    def _group(self, w: LogWriter, name: str) -> None:
        ranks = list(self.members.get(name, ()))
        gid = self.gids[name] = self.facts.gids[name]
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
            if not e["is_p2p"]:
                g = group_of(e)[0]
                last.setdefault(g, seq_of(e) - self.facts.seq_base.get(g, 1) - 1)
        for pg_id, status in self.dump["pg_status"].items():
            name = self.pg_names.get(pg_id)
            enqueued = status["last_enqueued_collective"]
            if name is not None and name not in last and enqueued is not None and enqueued > 0:
                last[name] = enqueued - 1
        for name, ranks in self.members.items():  # nothing kept and no counter known: not checked
            if self.rank in ranks and name not in last and name in self.facts.last_j:
                last[name] = self.facts.last_j[name]
                self.unchecked.append(f"group {name}: not checked: rank {self.rank}'s wrapped buffer kept none of its "
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
        key = (e["thread_id"], e["thread_name"])
        h = self.threads.get(key)
        if h is None:
            h = self.threads[key] = len(self.threads)
            w.keep({"k": lf.THREAD, "h": h, "n": key[1] or "?", "id": key[0]})
        return h

    def _record(self, w: LogWriter, eid: int, block: list[dict]) -> list:
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
        ts = max(0, (e["time_created_ns"] - self.base) // 1000)
        rec = {"k": lf.COLL, "o": w.string_id(wire), "g": gid, "ts": ts}
        if e["is_p2p"]:
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
        site, chain = site_of(e["frames"])
        if site is not None:
            rec["s"] = w.site_id(*site)
        if len(chain) > 1:
            rec["ch"] = w.chain_id(tuple(w.site_id(*f) for f in chain))
        h = self._thread(w, e)
        if h:
            rec["h"] = h
        if api != usual_api(wire):
            rec["x"] = w.string_id(api)
        if backend_of(e) != "gloo":
            rec["a"] = 1  # NCCL and the like: every op returns at once, enqueued on a stream
        w.write(rec, eid)
        if eid in self.unconfirmed:
            # gloo: its counters lag behind the op's return (a clean run's last collectives often
            # read as not completed): returned, completion unknown, never taken for where it waits
            return [{"k": lf.DONE, "i": eid, "r": ts}]
        if eid not in self.plan.open:
            done = e["time_discovered_completed_ns"]
            w.done(eid, ts, ts if done is None or done <= 0 else max(ts, (done - self.base) // 1000))
        # NCCL and the like: enqueued and not completed when the dump was taken: pending (the
        # first of its group is where the rank's stream waits; the later ones queue behind it)
        return []
