"""The run model: every rank's events, resolved and interned across the run.

Events are kept in columns (one array per field) and interned signatures, because a
4096-rank x 10,000-collective run is 41M events: objects per event would not fit.
`RankLog.event(i)` materializes one `Event` when a report or the TUI needs it.
"""

from __future__ import annotations

import os
from array import array
from collections import defaultdict
from dataclasses import dataclass, field

from . import logformat as lf
from .capture.wire import WIRE_OPS
from .reader import LogError, RawLog, find_logs, read_log

P2P_OPS = frozenset(("send", "recv_", "recv_any_source_"))
ROOTED_OPS = frozenset(("broadcast_", "reduce_", "gather_", "scatter_"))
# Ops whose tensor shapes may legitimately differ across ranks (only dtypes must agree).
SHAPE_FREE_OPS = frozenset(("alltoall_", "alltoall_base_"))
REDUCE_OPS = {0: "SUM", 1: "AVG", 2: "PRODUCT", 3: "MIN", 4: "MAX", 5: "BAND", 6: "BOR", 7: "BXOR", 8: "PREMUL_SUM"}
DTYPE_SIZES = {
    "float32": 4, "float": 4, "float64": 8, "double": 8, "float16": 2, "half": 2, "bfloat16": 2,
    "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex64": 8, "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1, "uint16": 2, "uint32": 4, "uint64": 8,
}


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
        n = 0
        for dtype, shape in self.tensors:
            k = DTYPE_SIZES.get(dtype, 4)
            for d in shape:
                k *= d
            n += k
        return n

    def describe(self) -> str:
        t = ", ".join(f"{d}[{'x'.join(map(str, s)) or 'scalar'}]" for d, s in self.tensors)
        parts = [self.api or self.op]
        if t:
            parts.append(t)
        if self.reduce_op is not None:
            parts.append(REDUCE_OPS.get(self.reduce_op, str(self.reduce_op)))
        if self.root is not None:
            parts.append(("peer " if self.op in P2P_OPS else "root ") + str(self.root))
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

    @property
    def completed(self) -> bool:
        return self.t_done is not None and self.error is None

    def where(self) -> str:
        if self.site is None:
            return "?"
        return f"{os.path.basename(self.site[0])}:{self.site[1]}"


@dataclass
class RankLog:
    """Columns of one rank's events plus its process-level state."""

    rank: int
    path: str
    header: dict
    run: "Run"
    sig: array = field(default_factory=lambda: array("I"))
    gid: array = field(default_factory=lambda: array("H"))
    gpos: array = field(default_factory=lambda: array("I"))
    site: array = field(default_factory=lambda: array("i"))
    label: array = field(default_factory=lambda: array("i"))
    thread: array = field(default_factory=lambda: array("H"))
    t_issue: array = field(default_factory=lambda: array("q"))
    t_return: array = field(default_factory=lambda: array("q"))
    t_done: array = field(default_factory=lambda: array("q"))
    call: array = field(default_factory=lambda: array("i"))
    flags: array = field(default_factory=lambda: array("B"))  # 1 async, 2 native
    errors: dict = field(default_factory=dict)  # event index -> message
    stacks_by_event: dict = field(default_factory=dict)  # event index -> stack site ids
    groups: list = field(default_factory=list)  # gid -> Group
    creations: list = field(default_factory=list)  # GroupCreation in order
    threads: list = field(default_factory=list)
    exception: tuple | None = None  # (type, message)
    trailer: bool = False
    disabled: str | None = None
    watchdog: list = field(default_factory=list)  # STACKS records
    sigterm_dump: str | None = None
    torn: bool = False
    junk: str | None = None
    by_group: dict = field(default_factory=dict)  # group name -> array of event indices

    def __len__(self) -> int:
        return len(self.sig)

    @property
    def world(self) -> int:
        return self.header["world"]

    def event(self, i: int) -> Event:
        run = self.run
        g = self.groups[self.gid[i]]
        site = self.site[i]
        label = self.label[i]
        st = self.stacks_by_event.get(i)
        return Event(
            rank=self.rank, index=i, group=g.name, position=self.gpos[i], sig=run.signatures[self.sig[i]],
            site=run.sites[site] if site >= 0 else None, label=run.strings[label] if label >= 0 else None,
            thread=self.threads[self.thread[i]] if self.thread[i] < len(self.threads) else "?",
            t_issue=self.t_issue[i], t_return=self.t_return[i] if self.t_return[i] >= 0 else None,
            t_done=self.t_done[i] if self.t_done[i] >= 0 else None, error=self.errors.get(i),
            call_id=self.call[i] if self.call[i] >= 0 else None, async_op=bool(self.flags[i] & 1),
            native=bool(self.flags[i] & 2), stack=tuple(run.sites[s] for s in st) if st else None,
        )

    def group_events(self, name: str) -> array:
        return self.by_group.get(name, array("I"))

    def pending(self) -> list[int]:
        """Events that never completed (still in flight when the log ended) or failed."""
        return [i for i in range(len(self.sig)) if self.t_done[i] < 0 or i in self.errors]

    @property
    def state(self) -> str:
        """finished | raised | killed-in-collective | stuck | exited-early | killed."""
        if self.exception is not None:
            return "raised"
        pend = [i for i in range(len(self.sig)) if self.t_done[i] < 0]
        if self.trailer:
            return "finished"
        if self.watchdog:
            return "stuck"
        if pend:
            return "killed-in-collective"
        return "killed"


class Run:
    """All ranks of one run; strings, sites and signatures interned run-wide."""

    def __init__(self, directory: str):
        self.directory = directory
        self.ranks: dict[int, RankLog] = {}
        self.signatures: list[Signature] = []
        self._sig_ids: dict[Signature, int] = {}
        self.strings: list[str] = []
        self._string_ids: dict[str, int] = {}
        self.sites: list[tuple] = []
        self._site_ids: dict[tuple, int] = {}
        self.world = 0
        self.warnings: list[str] = []

    def sig_id(self, sig: Signature) -> int:
        i = self._sig_ids.get(sig)
        if i is None:
            i = self._sig_ids[sig] = len(self.signatures)
            self.signatures.append(sig)
        return i

    def string_id(self, s: str) -> int:
        i = self._string_ids.get(s)
        if i is None:
            i = self._string_ids[s] = len(self.strings)
            self.strings.append(s)
        return i

    def site_id(self, site: tuple) -> int:
        i = self._site_ids.get(site)
        if i is None:
            i = self._site_ids[site] = len(self.sites)
            self.sites.append(site)
        return i

    def group_members(self, name: str) -> tuple:
        """Global ranks of a group, as recorded by the ranks that know it."""
        for log in self.ranks.values():
            for g in log.groups:
                if g.name == name and g.ranks is not None:
                    return tuple(g.ranks)
        return tuple(sorted(r for r, log in self.ranks.items() if any(g.name == name for g in log.groups)))

    def group_names(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in sorted(self.ranks):
            for g in self.ranks[r].groups:
                seen.setdefault(g.name)
        return list(seen)


def load_run(target: str | list[str]) -> Run:
    """Load a run directory (or a list of log files) and check that they belong together."""
    paths = target if isinstance(target, list) else find_logs(target)
    run = Run(target if isinstance(target, str) else os.path.commonpath(paths))
    raws = [read_log(p) for p in paths]
    _check_same_run(raws)
    for raw in raws:
        log = _build_rank(run, raw)
        run.ranks[log.rank] = log
    run.world = raws[0].header["world"]
    missing = sorted(set(range(run.world)) - set(run.ranks))
    if missing:
        run.warnings.append(f"no log for rank(s) {_ranges(missing)}: they never reached init_process_group or their logs are missing")
    return run


def _check_same_run(raws: list[RawLog]) -> None:
    first = raws[0].header
    for raw in raws[1:]:
        h = raw.header
        if h["run"] != first["run"] or h["world"] != first["world"]:
            raise LogError(
                f"logs of different runs mixed: {raws[0].path} (run {first['run']}, world {first['world']}) and "
                f"{raw.path} (run {h['run']}, world {h['world']}); pass one run directory"
            )
    seen: dict[tuple, str] = {}
    for raw in raws:
        key = (raw.header["rank"], raw.header.get("restart", 0))
        if key in seen:
            raise LogError(
                f"two logs for rank {key[0]} (restart {key[1]}): {seen[key]} and {raw.path}; "
                "logs of several launches are mixed in one directory"
            )
        seen[key] = raw.path
    latest = max(raw.header.get("restart", 0) for raw in raws)
    raws[:] = [raw for raw in raws if raw.header.get("restart", 0) == latest]


def _ranges(ranks) -> str:
    from .analysis.fold import rank_ranges

    return rank_ranges(ranks)


def _build_rank(run: Run, raw: RawLog) -> RankLog:
    h = raw.header
    log = RankLog(rank=h["rank"], path=raw.path, header=h, run=run, torn=raw.torn, junk=raw.junk)
    base_us = h.get("wall_ns", 0) // 1000
    strings: dict[int, str] = {}
    sites: dict[int, int] = {}
    tspecs: dict[int, tuple] = {}
    threads: dict[int, int] = {}
    gids: dict[int, int] = {}  # log gid -> index into log.groups
    group_index: dict[str, int] = {}
    counters: dict[int, int] = defaultdict(int)
    by_group: dict[str, array] = {}
    sig_cache: dict[tuple, int] = {}
    cols = (log.sig, log.gid, log.gpos, log.site, log.label, log.thread, log.t_issue, log.t_return, log.t_done,
            log.call, log.flags)
    sig_a, gid_a, gpos_a, site_a, label_a, thread_a, ti_a, tr_a, td_a, call_a, flags_a = (c.append for c in cols)
    n = 0

    def group_slot(local_gid: int, name: str | None = None, ranks=None, desc: str = "") -> int:
        slot = gids.get(local_gid)
        if slot is None:
            name = name if name is not None else f"?{local_gid}"
            slot = group_index.get(name)
            if slot is None:
                slot = group_index[name] = len(log.groups)
                log.groups.append(Group(name, tuple(ranks) if ranks is not None else None, desc or ""))
            gids[local_gid] = slot
        g = log.groups[slot]
        if ranks is not None and g.ranks is None:
            g.ranks = tuple(ranks)
        return slot

    for rec in raw.records:
        k = rec.get("k")
        try:
            if k == lf.COLL:
                key = (rec["o"], rec["g"], rec.get("t"), rec.get("r"), rec.get("p"), rec.get("u"), rec.get("x"),
                       rec.get("tag", 0), tuple(map(tuple, rec["sp"])) if "sp" in rec else None)
                sid = sig_cache.get(key)
                if sid is None:
                    op = strings[rec["o"]]
                    spec = WIRE_OPS.get(op)
                    tensors = tspecs[rec["t"]] if "t" in rec else ()
                    if op in SHAPE_FREE_OPS:
                        tensors = tuple((d, ()) for d, _ in tensors)
                    api = strings[rec["x"]] if "x" in rec else (spec.api if spec else op)
                    role = strings[rec["u"]] if "u" in rec else None
                    sid = sig_cache[key] = run.sig_id(
                        Signature(op, tensors, rec.get("r"), rec.get("p"), role, api, rec.get("tag", 0)))
                slot = group_slot(rec["g"])
                sig_a(sid)
                gid_a(slot)
                gpos_a(counters[slot])
                counters[slot] += 1
                name = log.groups[slot].name
                idx = by_group.get(name)
                if idx is None:
                    idx = by_group[name] = array("I")
                idx.append(n)
                site_a(sites.get(rec.get("s", -1), -1))
                label_a(run.string_id(strings[rec["l"]]) if "l" in rec else -1)
                thread_a(threads.get(rec.get("h", 0), 0))
                ti_a(base_us + rec.get("ts", 0))
                tr_a(-1)
                td_a(-1)
                call_a(rec.get("q", -1))
                flags_a((1 if rec.get("a") else 0) | (2 if rec.get("n") else 0))
                if "st" in rec:
                    log.stacks_by_event[n] = [sites.get(s, -1) for s in rec["st"]]
                n += 1
            elif k == lf.DONE:
                i = rec["i"]
                if 0 <= i < n:
                    if "r" in rec:
                        log.t_return[i] = base_us + rec["r"]
                    if "c" in rec:
                        log.t_done[i] = base_us + rec["c"]
                    elif "r" in rec and "e" not in rec:
                        log.t_done[i] = base_us + rec["r"]  # no future (gloo P2P): done at return
                    if "e" in rec:
                        log.errors[i] = str(rec["e"])
            elif k == lf.STRING:
                strings[rec["i"]] = rec["s"]
            elif k == lf.SITE:
                sites[rec["i"]] = run.site_id((strings[rec["f"]], rec["l"], strings[rec["n"]]))
            elif k == lf.TSPEC:
                tspecs[rec["i"]] = tuple((strings[d], tuple(s)) for d, s in rec["t"])
            elif k == lf.THREAD:
                threads[rec["h"]] = len(log.threads)
                log.threads.append(rec["n"])
            elif k == lf.GROUP:
                _group_record(log, rec, group_slot, run, sites)
            elif k == lf.EXCEPTION:
                log.exception = (rec.get("t", "?"), rec.get("m", ""))
            elif k == lf.TRAILER:
                log.trailer = True
            elif k == lf.STACKS:
                log.watchdog.append(rec)
            elif k == lf.DISABLED:
                log.disabled = rec.get("m", "")
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise LogError(f"{raw.path}: malformed {k!r} record ({type(exc).__name__}: {exc})") from None
    if not log.threads:
        log.threads.append("MainThread")
    log.by_group = by_group
    sigterm = raw.path[: -len(lf.LOG_SUFFIX)] + lf.SIGTERM_SUFFIX
    if os.path.exists(sigterm):
        with open(sigterm, errors="replace") as f:
            log.sigterm_dump = f.read() or None
    return log


def _group_record(log: RankLog, rec: dict, group_slot, run: Run, sites: dict) -> None:
    op = rec.get("op", "seen")
    ranks = rec.get("r")
    if "gid" in rec:
        group_slot(rec["gid"], rec.get("g"), ranks, rec.get("d", ""))
    if op == "seen":
        return
    site = run.sites[sites[rec["s"]]] if rec.get("s") in sites else None
    log.creations.append(GroupCreation(op, rec.get("g"), tuple(ranks) if ranks is not None else None, site,
                                       rec.get("m", True), rec.get("d") or ""))
