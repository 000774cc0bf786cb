"""Every rank's events, resolved and interned across the run.

Events are kept in columns (one array per field) and interned signatures, because a
4096-rank x 10,000-collective run is 41M events: objects per event would not fit.
`RankLog.event(i)` materializes one `Event` when a report or the TUI needs it.
"""

from __future__ import annotations

import os
import re
from array import array
from bisect import bisect_left
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import cache, cached_property
from itertools import accumulate

import numpy as np

from ..knowledge import sites
from ..knowledge.frames import USER, owner
from ..logfile import format as lf
from ..logfile.decode import LogFile, Tables
from ..logfile.ops import P2P_OPS, SHAPE_FREE_OPS
from ..logfile.reader import may_exist, read_text
from ..logfile.scan import Scan
from .group_index import GroupIndex

REDUCE_OPS = {0: "SUM", 1: "AVG", 2: "PRODUCT", 3: "MIN", 4: "MAX", 5: "BAND", 6: "BOR", 7: "BXOR", 8: "PREMUL_SUM"}
DTYPE_SIZES = {
    "float32": 4, "float": 4, "float64": 8, "double": 8, "float16": 2, "half": 2, "bfloat16": 2,
    "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint16": 2, "uint32": 4, "uint64": 8,
}


def tensor_bytes(tensors: tuple) -> int:
    """The bytes of tensors ((dtype, shape), ...) (a dtype not known: 4 bytes an element)."""
    n = 0
    for dtype, shape in tensors:
        k = DTYPE_SIZES.get(dtype, 4)
        for d in shape:
            k *= d
        n += k
    return n


@dataclass(frozen=True)
class Signature:
    """What every member of a group must agree on for one collective."""

    op: str
    tensors: tuple  # ((dtype, shape), ...) of the tensors ranks must agree on
    reduce_op: int | None
    root: int | None  # group-local root (rooted ops) or peer (P2P)
    role: str | None  # purpose role of torch internals; None for user calls
    api: str
    tag: int = 0

    @property
    def dtypes(self) -> tuple:
        return tuple(d for d, _ in self.tensors)

    @property
    def shapes(self) -> tuple:
        return tuple(s for _, s in self.tensors)

    @property
    def numel(self) -> int:
        n = 0
        for _, shape in self.tensors:
            k = 1
            for d in shape:
                k *= d
            n += k
        return n

    @property
    def nbytes(self) -> int:
        return tensor_bytes(self.tensors)

    def describe(self) -> str:
        t = ", ".join(f"{d}[{'x'.join(map(str, s)) or 'scalar'}]" for d, s in self.tensors)
        parts = [self.api or self.op]
        if t:
            parts.append(t)
        if self.reduce_op is not None:
            parts.append(REDUCE_OPS.get(self.reduce_op, str(self.reduce_op)))
        if self.root is not None:
            parts.append(("peer " if self.op in P2P_OPS else "root ") + str(self.root))
        if self.tag:
            parts.append(f"tag {self.tag}")
        return " ".join(parts)


@dataclass
class Group:
    """A process group as one rank saw it: log-local id, name, members (global ranks)."""

    name: str
    ranks: tuple | None
    desc: str = ""


@dataclass
class GroupCreation:
    op: str  # init / new / split / destroy
    name: str | None
    ranks: tuple | None
    site: tuple | None
    member: bool = True
    desc: str = ""  # group_desc: the user's name for the group
    ts: int = 0  # µs since the log's origin
    took_us: int | None = None  # how long new_group / split_group took on this rank


@dataclass
class Event:
    """One collective of one rank, materialized for reports."""

    rank: int
    index: int  # position in this rank's log
    group: str
    position: int  # position in this rank's sequence of the group
    sig: Signature
    site: tuple | None  # (file, line, function)
    label: str | None
    thread: str
    t_issue: int  # absolute wall-clock microseconds
    t_return: int | None
    t_done: int | None
    error: str | None
    call_id: int | None
    async_op: bool
    native: bool  # issued below the Python API (C++ reducer, functional collectives)
    stack: tuple | None = None
    peer_global: int | None = None  # root / peer as a global rank
    tensors: tuple | None = None  # as recorded, when the signature drops sizes (all-to-all)
    splits: tuple | None = None  # all_to_all_single: (input split sizes, output split sizes)
    chain: tuple | None = None  # the user's call chain: (file, line, function) outermost first, the site last

    @property
    def sized(self) -> Signature:
        """The signature with the sizes as recorded (an all-to-all's signature leaves them out)."""
        return self.sig if self.tensors is None else replace(self.sig, tensors=self.tensors)

    def splits_text(self) -> str:
        """' splits in [..] out [..]' for an all_to_all_single given split sizes, else ''."""
        if self.splits is None or not any(self.splits):
            return ""
        return f" splits in {list(self.splits[0]) or 'even'} out {list(self.splits[1]) or 'even'}"

    def describe(self) -> str:
        return self.sized.describe() + self.splits_text()

    @property
    def completed(self) -> bool:
        return self.t_done is not None and self.error is None

    def where(self) -> str:
        return sites.short(self.site)


def _completion(scan: Scan) -> tuple[set, set]:
    """(pending, unknown completion) of a scanned log: collectives issued before damage, or before
    recording stopped, never completed as far as the log shows are neither pending nor completed."""
    pending, unknown = scan.pending, set()
    if scan.damage:
        last = max(d[0] for d in scan.damage)
        unknown = {i for i in scan.pending if scan.off[i] < last}
        pending -= unknown  # (in place: the ranks of its kind share the set, as they always did)
    if scan.disabled is not None:  # (their completions would have been written after it)
        unknown |= pending
        pending = set()
    return pending, unknown


@cache
def _cached_names() -> frozenset:
    """RankLog's cached properties: computed per rank when asked, never shared by `kind_state`."""
    return frozenset(n for n, v in vars(RankLog).items() if isinstance(v, cached_property))


def _sigterm_dump(path: str, dump: bool | None) -> str | None:
    """The SIGTERM dump beside a log (faulthandler's stacks), or None; `dump` False: surely none."""
    name = path[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX
    if dump is False or (dump is None and not may_exist(name)):
        return None
    return read_text(name) or None


_DUMP_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+)$')  # faulthandler's frame lines


class RankLog:
    """One rank: compact columns for the matcher, events decoded on demand for reports."""

    def __init__(self, run: "Run", scan: Scan, sig_map: list[int], like: "RankLog | None" = None,
                 dump: bool | None = None):
        """`like`: a rank of the same kind (model/load.py), whose columns this one shares. `dump`:
        whether a SIGTERM dump may lie beside the log (None: looked at here)."""
        h = scan.header
        self.run = run
        self.rank: int = h["rank"]
        self.path = scan.path
        self.header = h
        self.like = like  # read from its checkpoint: events are decoded from `like`'s log
        if like is not None:
            self.sig = like.sig
        elif sig_map != list(range(len(sig_map))):
            self.sig = array("I", [sig_map[s] for s in scan.sig])
        else:
            self.sig = scan.sig
        self.gid = scan.gid
        self.off = scan.off
        if like is not None:
            self.groups, self.creations = like.groups, like.creations
        else:
            self.groups = [Group(name, ranks, desc) for name, ranks, desc in scan.groups]
            self.creations = [GroupCreation(*c) for c in scan.creations]
        # unknown_completion: never completed as far as the log shows, but issued before damage that
        # may have held their completion (neither pending nor completed)
        self.pending, self.unknown_completion = _completion(scan)
        self.disabled = scan.disabled  # recording stopped (a Q record): what came after is not known
        self.stop_error = scan.stop_error
        self.errors: dict[int, str] = scan.errors
        self.unconfirmed: list[int] = scan.unconfirmed  # returned, completion unknown (scan.Scan)
        self.non_member = scan.non_member  # [(api, site, ts)] calls torch skipped: not in the group
        self.threads = scan.threads
        self.exception = scan.exception
        self.trailer = scan.trailer
        self.watchdog = scan.watchdog
        self.syncs = scan.syncs  # [(ts, site, event id, what)] where the CPU waited for its stream
        self.steps = scan.steps  # [(ts, optimizer index)] where its optimizers finished a step
        self.files = scan.files  # a call site's file -> what the recorder saw of it (L records)
        self.sources = scan.sources  # event -> the rank a receive from any source got its message from
        self.torn = scan.torn
        self.junk = scan.junk
        self.partial = scan.partial  # only the first collectives were read (a preview)
        self.running = False  # its process was still running when the log was read (load_run)
        self.a2a = scan.a2a  # event -> all_to_all_single sizes (scan.Scan.a2a)
        self.seq = scan.seq  # each event's `j` (format 2; kept only where collectives were lost or dropped)
        self.eid_of = scan.eid_of  # event index -> event id (they differ after lost records)
        self.damage = scan.damage  # [start byte, end byte, collectives lost or None]
        self.malformed = scan.malformed  # damage start (or a left-out collective's offset) -> why
        self.lost = scan.lost  # event ids of collectives that could not be read
        self.eid_runs = scan.eid_runs
        self.colls_written = scan.colls_written
        # a capped log whose oldest segments were deleted: how many collectives it left out, and
        # the `j` each group goes on from (groups with no collective since: their count then)
        self.dropped = scan.dropped
        self.starts = {self.groups[slot].name: j for slot, j in scan.starts.items()}
        site_ids = [run.site_id(site) for site in scan.sites] if like is None else None
        self.site_set = like.site_set if like is not None else set(site_ids)
        # the statistics' columns (load_run(times=True)), and the run-wide ids of the sites they name
        self.tables = scan.tables  # its log's tables, as the scan read them (None: read them when needed)
        self.times = scan.times if like is None else None
        self.time_sites = site_ids if self.times is not None else None
        self.chain = scan.chain  # each event's chain key (scan.Scan.chain)
        self.chain_sites = scan.chain_sites
        self.base_us = h.get("wall_ns", 0) // 1000
        self._by_group: dict[str, object] | None = like.by_group if like is not None else None
        self.sigterm_dump = _sigterm_dump(self.path, dump)

    @classmethod
    def of_kind(cls, kind: dict, scan: Scan, path: str, header: dict, errors: dict, exception,
                dump: bool | None = None) -> RankLog:
        """A rank of a kind (model/load.py) read from its checkpoint: what
        RankLog(run, <scan's columns with this log's path, header, errors, exception>, ..., like=first)
        gives, from `kind` (the first rank's attributes as built, `kind_state`) without a Scan
        or the attributes set again: thousands of ranks of one kind are built in a blink."""
        log = object.__new__(cls)
        d = log.__dict__
        d.update(kind)
        d["rank"], d["path"], d["header"] = header["rank"], path, header
        d["pending"], d["unknown_completion"] = _completion(scan)
        d["errors"], d["exception"] = errors, exception
        d["base_us"] = header.get("wall_ns", 0) // 1000
        d["sigterm_dump"] = _sigterm_dump(path, dump)
        return log

    def kind_state(self) -> dict:
        """This rank's attributes as shared by the ranks of its kind built by `of_kind` (its
        columns, groups, event grouping), those of their own set there."""
        self.by_group  # noqa: B018 - (computed once, shared)
        cached = _cached_names()
        state = {k: v for k, v in self.__dict__.items() if k not in cached}
        state.update(like=self, running=False, times=None, time_sites=None, _by_group=self._by_group)
        return state

    def __len__(self) -> int:
        return len(self.sig)

    @cached_property
    def _chain_ids(self) -> dict:
        return {key: self.run.chain_id(frames) for key, frames in self.chain_sites.items()}

    @cached_property
    def chain_table(self) -> int:
        """A number two ranks share exactly when their chain keys name the same chains (their
        `chain_sites` are equal): compared once per rank, not once per group."""
        return self.run.chain_tables.setdefault(frozenset(self._chain_ids.items()), len(self.run.chain_tables))

    @cached_property
    def chain_set(self) -> frozenset:
        """Every run-wide chain id the rank issued a collective from (any group)."""
        return frozenset(self._chain_ids.values())

    def local_chains(self, idx, end: int) -> array:
        """The file-local chain keys (scan.Scan.chain) of the events idx[:end]."""
        col = self.chain
        if isinstance(idx, range):
            return col[idx.start:idx.start + min(end, len(idx))]
        return array("i", map(col.__getitem__, idx if end >= len(idx) else idx[:end]))

    def chains_of(self, idx, end: int) -> array:
        """Run-wide chain ids (0: no chain known) of the events idx[:end], in that order."""
        ids, col = self._chain_ids, self.chain
        if not ids or len(col) < len(self.sig):
            return array("I", bytes(4 * min(end, len(idx))))
        return array("I", [ids.get(col[i], 0) for i in idx[:end]])

    @property
    def stopped(self) -> str | None:
        """Why recording stopped before the process ended ('could not write the log: No space
        left on device (ENOSPC)', 'an internal error in collcheck: ...'); None when it did not."""
        if self.disabled is None:
            return None
        if self.stop_error is not None:
            return f"{self.disabled} ({self.stop_error})"
        return f"an internal error in collcheck: {self.disabled}"

    @property
    def crash(self) -> str | None:
        """'Fatal Python error: Aborted' (etc.) when the rank died of a fatal signal: the dump starts
        with it (a SIGTERM dump that faulthandler could not finish has it further down: a kill)."""
        if not self.sigterm_dump:
            return None
        first = next((line.strip() for line in self.sigterm_dump.splitlines() if line.strip()), "")
        return first if first.startswith("Fatal Python error") else None

    @cached_property
    def dump_site(self) -> tuple | None:
        """(file, line, function) where the signalled thread was when its stacks were dumped (a
        SIGTERM from torchrun or a scheduler): its innermost frame in the user's code, else its
        innermost frame; None without a dump or Python frames."""
        text = self.sigterm_dump or ""
        at = text.find("Current thread ")
        if at < 0:
            return None
        frames = []
        for line in text[at:].splitlines()[1:]:
            m = _DUMP_FRAME.match(line)
            if m is None:
                break
            frames.append((m[1], int(m[2]), m[3].strip()))
        user = next((f for f in frames if owner(f[0]) == USER), None)
        return user or (frames[0] if frames else None)

    @property
    def world(self) -> int:
        return self.header["world"]

    @property
    def by_group(self) -> dict:
        """group name -> indices of this rank's events in it (a range when there is one group)."""
        if self._by_group is None and not len(self.sig):
            self._by_group = {}
        if self._by_group is None:
            used = set(self.gid) if len(self.groups) > 1 else {0}
            if len(used) == 1 and len(self.sig):
                self._by_group = {self.groups[next(iter(used))].name: range(len(self.sig))}
            else:  # (each slot's events in order, from one stable sort of the slots)
                slot = np.frombuffer(self.gid, dtype=f"u{self.gid.itemsize}")
                joined = array("I")
                joined.frombytes(np.argsort(slot, kind="stable").astype(np.uint32).tobytes())
                counts = np.bincount(slot).tolist()
                starts = list(accumulate(counts, initial=0))
                self._by_group = {self.groups[s].name: joined[starts[s]:starts[s + 1]] for s in used}
        return self._by_group

    @cached_property
    def a2a_by_group(self) -> dict[str, dict]:
        """group name -> its all_to_all_single events -> their sizes (`a2a`, split by group)."""
        out: dict[str, dict] = {}
        for i, sizes in self.a2a.items():
            out.setdefault(self.groups[self.gid[i]].name, {})[i] = sizes
        return out

    def group_events(self, name: str):
        return self.by_group.get(name, range(0))

    def group_of(self, i: int) -> str:
        """The name of event i's group."""
        return self.groups[self.gid[i]].name

    def completed(self, i: int) -> bool:
        return i not in self.pending and i not in self.errors

    @cached_property
    def unconfirmed_set(self) -> frozenset:
        """Events that returned but whose completion was never known (see `unconfirmed`)."""
        return frozenset(self.unconfirmed)

    MAX_DAMAGE_NOTES = 20  # damaged ranges said one by one; the rest in one line

    def damage_notes(self) -> list[str]:
        """One line per damaged byte range (the first MAX_DAMAGE_NOTES) and for collectives left
        unreadable by it; a record that does not match the schema says what is wrong with it."""
        if not self.damage and not self.lost:  # (most logs: thousands of ranks ask)
            return []
        name = os.path.basename(self.path)
        notes = []
        for start, end, lost in self.damage[:self.MAX_DAMAGE_NOTES]:
            what = "an unknown number of collectives" if lost is None else f"{lost} collective{'s' if lost != 1 else ''}"
            why = self.malformed.get(start)
            notes.append(f"{name}: bytes {start}-{end} damaged ({what} lost"
                         + (f"; {why}, left out" if why else "") + "); the records before and after are used")
        if len(self.damage) > self.MAX_DAMAGE_NOTES:
            notes.append(f"{name}: {len(self.damage) - self.MAX_DAMAGE_NOTES} more damaged byte ranges")
        if self.lost:
            starts = {d[0] for d in self.damage}
            bad = [why for at, why in self.malformed.items() if at not in starts]
            notes.append(f"{name}: {len(self.lost)} collective{'s' if len(self.lost) != 1 else ''} unreadable "
                         "(a string, tensor spec or group record they need was in damaged bytes"
                         + (f", or their record was malformed: {bad[0]}" if bad else "") + ")")
        return notes

    @cached_property
    def losses(self) -> list[tuple[int, int | None]]:
        """(event index, collectives missing just before it; None: not known) wherever this log
        lost collectives: damaged bytes, or records they needed that were damaged. A rank read
        from its checkpoint has its kind's columns, and so its losses."""
        if self.like is not None:
            return self.like.losses
        out = []
        runs = self.eid_runs
        for (n0, e0), (n1, e1) in zip(runs, runs[1:]):
            if e1 > e0 + n1 - n0:
                out.append((n1, e1 - e0 - n1 + n0))
        end = self.eid_of(len(self) - 1) + 1 if len(self) else max(runs[-1][1], 0)
        written = max(self.colls_written, max(self.lost, default=-1) + 1)
        if any(d[2] is None for d in self.damage) or self.disabled is not None:
            out.append((len(self), None))  # the damage ran to the end of the file, or recording stopped
        elif written > end:
            out.append((len(self), written - end))
        return out

    def event(self, i: int) -> Event:
        """Event i, decoded from the log (a rank read from its checkpoint: from its kind's log,
        with that log's times)."""
        file = self.run.log_file((self.like or self).path)
        coll, done = file.event(self.off[i], self.eid_of(i))
        return self._event(i, coll, done, self.tables if self.tables is not None else file.tables)

    def events(self) -> list[Event]:
        """Every event, in order: what [event(i) for i in range(len(log))] gives, in one pass over
        the file (event(i) reads from the event's frame on, once per event: minutes for millions).
        Format 1 logs and logs whose pass misses a collective go event by event."""
        if not len(self):
            return []
        file = self.run.log_file((self.like or self).path)
        found = file.events([self.eid_of(i) for i in range(len(self))])
        if found is None:
            return [self.event(i) for i in range(len(self))]
        return [self._event(i, coll, done, file.tables) for i, (coll, done) in enumerate(found)]

    def _event(self, i: int, coll: dict, done: dict | None, tables: Tables) -> Event:
        strings, sites = tables.strings, tables.sites
        base = (self.like or self).base_us
        g = self.groups[self.gid[i]]
        stack = tuple(sites.get(s) for s in coll["st"]) if "st" in coll else None
        chain = self.chain_sites.get(self.chain[i]) if i < len(self.chain) else None
        sig = self.run.signatures[self.sig[i]]
        peer = self.run.global_rank(g.name, sig.root)
        tensors = splits = None
        if sig.op in SHAPE_FREE_OPS:
            tensors = tables.tspecs.get(coll.get("t"), sig.tensors)
            sp = coll.get("sp")
            splits = (tuple(sp[0]), tuple(sp[1])) if sp and len(sp) == 2 else None
        return Event(
            rank=self.rank, index=i, group=g.name, position=self._position(i), sig=sig,
            site=sites.get(coll.get("s")), label=strings.get(coll["l"]) if "l" in coll else None,
            thread=tables.threads.get(coll.get("h", 0), "MainThread"), t_issue=base + coll.get("ts", 0),
            t_return=base + done["r"] if done and "r" in done else None,
            t_done=None if i in self.pending or done is None else base + done.get("c", done.get("r", 0)),
            error=self.errors.get(i), call_id=coll.get("q"), async_op=bool(coll.get("a")), native=bool(coll.get("n")),
            stack=stack, peer_global=peer, tensors=tensors, splits=splits, chain=chain,
        )

    def _position(self, i: int) -> int:
        idx = self.by_group[self.groups[self.gid[i]].name]
        if isinstance(idx, range):
            return i
        return bisect_left(idx, i)

    @property
    def state(self) -> str:
        """finished | raised | crashed | stuck | killed-in-collective | killed | damaged |
        recording-stopped, for a Flight Recorder dump dumped | waiting-at-dump (a collective
        enqueued, never completed), and for the log of a process still running running |
        running-in-collective.

        A partial (preview) log's end is not known yet: it reads as finished. `crashed`: a
        fatal signal (SIGABRT from a gloo check, SIGSEGV) dumped its stacks beside the log.
        `recording-stopped`: the log says recording stopped (`stopped`), so what the rank did
        after its last record is not known, how it ended neither (unless its trailer says)."""
        if self.disabled is not None:
            return "recording-stopped"
        if self.exception is not None:
            return "raised"
        if self.damage and not self.trailer:
            return "damaged"  # how it ended may have been in the damaged bytes
        if self.trailer or self.partial:
            return "finished"
        if self.header.get("source") == "flight-recorder":  # a snapshot of a rank still running
            return "waiting-at-dump" if self.pending else "dumped"
        if self.running:
            return "running-in-collective" if self.pending else "running"
        if self.crash is not None:
            return "crashed"
        if self.watchdog:
            return "stuck"
        if self.pending:
            return "killed-in-collective"
        return "killed"


class Run:
    """All ranks of one run; strings, sites and signatures interned run-wide."""

    FILE_CACHE = 16  # decoded files kept for materializing events

    def __init__(self, directory: str):
        self.directory = directory
        self.ranks: dict[int, RankLog] = {}
        self.signatures: list[Signature] = []
        self._sig_ids: dict[Signature, int] = {}
        self.sites: list[tuple] = []
        self._site_ids: dict[tuple, int] = {}
        self._chains: dict[tuple, int] = {}  # a call chain (frames outermost first) -> its id, from 1
        self.chains: list[tuple] = [()]  # id -> the chain (0: none known)
        self.chain_tables: dict[frozenset, int] = {}  # a rank's chain keys -> chain ids: RankLog.chain_table
        self.world = 0
        self.warnings: list[str] = []
        # ranks or groups nothing could be compared in (missing logs, empty dumps): a run without
        # findings is then 'incomplete', not 'clean'. Each is also among the warnings.
        self.unchecked: list[str] = []
        self.source = "collcheck"  # what wrote the logs: "collcheck", or "flight-recorder" (converted dumps)
        self._groups: tuple[int, GroupIndex] | None = None  # (ranks it was built from, the index)
        self._files: OrderedDict[str, LogFile] = OrderedDict()

    @property
    def source_prints(self) -> dict[str, dict]:
        """A call site's file -> what the recorders saw of it ({"s": size, "m": mtime ns, "h": hash}),
        merged over the ranks (one machine's file: the same on each of its ranks)."""
        out: dict[str, dict] = {}
        for log in self.ranks.values():
            for path, seen in log.files.items():
                out.setdefault(path, {}).update(seen)
        return out

    def host_of(self, rank: int) -> str | None:
        """The host the rank ran on, as its log's header says (None: no log, or none said)."""
        log = self.ranks.get(rank)
        host = log.header.get("host") if log is not None else None
        return host if isinstance(host, str) and host else None

    @property
    def hosts(self) -> list[str]:
        """The hosts the ranks ran on, each once (sorted)."""
        return sorted({h for h in (log.header.get("host") for log in self.ranks.values()) if isinstance(h, str) and h})

    @property
    def poll_ms(self) -> float | None:
        """How often the recorders polled for completions where the backend's futures complete at
        enqueue (NCCL): the resolution of those completion times; None: no rank polled."""
        found = [v for v in (log.header.get("poll_ms") for log in self.ranks.values())
                 if isinstance(v, (int, float)) and v > 0]
        return max(found) if found else None

    @property
    def running(self) -> list[int]:
        """Ranks whose processes were still running when their logs were read: the run is a snapshot."""
        return sorted(r for r, log in self.ranks.items() if log.running)

    @property
    def on_streams(self) -> bool:
        """The collectives ran on streams, as under NCCL (a Flight Recorder dump, the simulated
        NCCL backend): a call returned at once, and collectives that completed were paired by
        their position in the group, whatever their ops and sizes (NCCL checks nothing)."""
        backends = {str(log.header.get("backend", "")) for log in self.ranks.values()}  # (a few, for thousands of ranks)
        return any("nccl" in b.lower() for b in backends)

    def sig_id(self, sig: Signature) -> int:
        i = self._sig_ids.get(sig)
        if i is None:
            i = self._sig_ids[sig] = len(self.signatures)
            self.signatures.append(sig)
        return i

    def site_id(self, site: tuple) -> int:
        i = self._site_ids.get(site)
        if i is None:
            i = self._site_ids[site] = len(self.sites)
            self.sites.append(site)
        return i

    def chain_id(self, frames: tuple) -> int:
        i = self._chains.get(frames)
        if i is None:
            i = self._chains[frames] = len(self.chains)
            self.chains.append(frames)
        return i

    def log_file(self, path: str) -> LogFile:
        """A rank's log, read once for the events reports ask for (the last FILE_CACHE kept)."""
        file = self._files.pop(path, None) or LogFile(path)
        self._files[path] = file
        while len(self._files) > self.FILE_CACHE:
            self._files.popitem(last=False)
        return file

    @property
    def group_index(self) -> GroupIndex:
        """Every group's members and description, indexed once (again when ranks were added)."""
        if self._groups is None or self._groups[0] != len(self.ranks):
            self._groups = (len(self.ranks), GroupIndex(self.ranks))
        return self._groups[1]

    def group_members(self, name: str) -> tuple:
        """Global ranks of a group, as recorded by the ranks that know it."""
        return self.group_index.members(name)

    def global_rank(self, group: str, group_rank: int | None) -> int | None:
        """A group rank (a root or P2P peer) as a global rank; as given when the group's members
        are unknown or it is out of range."""
        members = self.group_members(group)
        if group_rank is None or not 0 <= group_rank < len(members):
            return group_rank
        return members[group_rank]

    def group_names(self) -> list[str]:
        return list(self.group_index.names)
