"""Scan one rank's log into compact columns; runs in worker processes for big runs.

Only what the matcher needs is kept per event: a signature id, a group slot and the
byte offset of the record (about 14 bytes). Everything else (call site, label, times)
is decoded again from that offset when a report asks for the event (`RankLog.event`).
"""

from __future__ import annotations

import functools
import os
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from struct import error as StructError

from . import format as lf
from .ops import SHAPE_FREE_OPS, WIRE_OPS
from .reader import LogError, LogStream, parse_header, read_bytes, read_prefix, shown
from .records import DONE2, DONE3, TS_J, coll_problem, signature_problem

MAX_GROUPS = 0xFFFF  # groups of one log (group slots are kept in 16 bits)

# A collective of other keys than these goes the hot loop's general way (`_Scanner.collective`)
_PLAIN_KEYS = frozenset(("k", "o", "g", "t", "r", "p", "s", "ch", "ts", "j", "d"))
_EXT_KEYS = _PLAIN_KEYS | {"u", "l", "a", "n", "x"}
_PLAIN_MOST = 10  # keys of a collective looked up among the plain ones first (more: torch's internals)
_MAX_KEYS = 1 << 20  # collectives' keys kept (the hot loop's cache)


@dataclass
class Scan:
    """What a worker sends back for one file (all picklable, mostly flat arrays)."""

    path: str
    header: dict
    size: int
    good_bytes: int
    torn: bool
    junk: str | None
    sig: array  # local signature id per event
    gid: array  # group slot per event
    off: array  # byte offset of each event's C record
    signatures: list  # local id -> Signature fields tuple (resolved strings)
    groups: list  # slot -> (name, ranks or None, desc)
    pending: set  # events with no completion record
    errors: dict  # event -> error text
    creations: list  # (op, name, ranks, site tuple or None, member, desc, ts)
    sites: list  # every call site defined in the file: (file, line, function)
    threads: list
    exception: tuple | None = None  # (type, message, raise site (file, line, function) or None)
    trailer: bool = False
    disabled: str | None = None
    watchdog: list = field(default_factory=list)
    partial: bool = False  # stopped at `limit` collectives: a preview of the file's beginning
    # all_to_all_single events (their signature ignores sizes): event -> (input rows, elements per
    # row, input split sizes, output split sizes), for analysis/splits.py
    a2a: dict = field(default_factory=dict)
    # events that returned but whose completion was never known (gloo P2P work has no future):
    # a wait() that later raised may have been waiting in them (analysis/hang.py)
    unconfirmed: list = field(default_factory=list)
    # calls torch skipped because this rank is not in the group: (api, site or None, ts)
    non_member: list = field(default_factory=list)
    # where the CPU thread waited for the stream (a backend with NCCL's semantics): (ts, site or
    # None, event id waited for or None, what: "item()", "barrier()", ...)
    syncs: list = field(default_factory=list)
    steps: list = field(default_factory=list)  # [(ts, optimizer)] optimizer steps (O records)
    # format 2: each event's `j` (its position among the group's collectives, or its P2P
    # channel's messages, as the recorder counted them); kept only when collectives were lost or
    # dropped (scan_bytes' second pass), else empty: positions are then what they were
    seq: array = field(default_factory=lambda: array("Q"))
    eid_runs: list = field(default_factory=lambda: [(0, 0)])  # (event index, event id) where ids jump
    damage: list = field(default_factory=list)  # [start byte, end byte, collectives lost or None]
    # records that do not match the schema (logfile/records.py), left out: damage start (or the offset of a
    # collective's frame, for one whose signature fields are wrong: also in `lost`) -> why
    malformed: dict = field(default_factory=dict)
    lost: list = field(default_factory=list)  # event ids of collectives unreadable (a record they need was lost)
    duplicates: int = 0  # frames skipped as copies of earlier ones
    colls_written: int = 0  # C records the writer had written by the last good frame (format 2)
    # a capped log whose oldest segments were deleted: collectives read before the gap are left
    # out (`dropped` of them), and the groups' counts at the first segment after it (`starts`:
    # group slot -> the `j` its next collective has) tell where each group goes on
    dropped: int = 0
    starts: dict = field(default_factory=dict)
    # each event's call chain, by a file-local key: a chain id (K record) >= 0, -2 - site id for a
    # call site alone (a chain of one frame), -1 none; `chain_sites` resolves every key used
    chain: array = field(default_factory=lambda: array("i"))
    chain_sites: dict = field(default_factory=dict)  # key -> ((file, line, function), ...) outermost first

    def event_of(self, eid: int) -> int | None:
        """The event index of an event id (None: not among the events read)."""
        k = bisect_right(self.eid_runs, eid, key=lambda r: r[1]) - 1
        if k < 0:
            return None
        n0, e0 = self.eid_runs[k]
        i = n0 + eid - e0
        end = self.eid_runs[k + 1][0] if k + 1 < len(self.eid_runs) else len(self.sig)
        return i if n0 <= i < end else None

    def eid_of(self, i: int) -> int:
        k = bisect_right(self.eid_runs, i, key=lambda r: r[0]) - 1
        n0, e0 = self.eid_runs[k]
        return e0 + i - n0


def scan_file(path: str, limit: int | None = None) -> Scan:
    """Scan a whole log, or only its first `limit` collectives (reading about that much of it)."""
    if limit is None:
        return scan_bytes(read_bytes(path), path)
    want = 65536 + 160 * limit  # records are ~50-100 bytes: usually enough
    data = read_prefix(path, want)
    scan = scan_bytes(data, path, limit)
    if not scan.partial and len(data) == want:
        scan = scan_bytes(read_prefix(path, None), path, limit)  # it held fewer: read it all
    return scan


def scan_bytes(data: bytes, path: str, limit: int | None = None, keep_seq: bool = False) -> Scan:
    """Columns of one log's bytes; with `limit`, stop after that many collectives (`partial`):
    their completions may lie beyond, so a partial scan reports none as pending.

    A record that needs a string, tensor spec or group whose record was lost to damage is
    left out (a collective: counted in `lost`); a lost call site only makes its site unknown."""
    header = parse_header(data, path)
    scan = Scan(path, header, len(data), 0, False, None, array("I"), array("H"), array("Q"), [], [], set(), {},
                [], [], [])
    stream = LogStream(data, path, expand_done=False, check_colls=False)
    scanner = _Scanner(scan, keep_seq)
    scanner.read(stream, limit)
    if not keep_seq and (stream.damage or scan.lost or scan.dropped or len(scan.eid_runs) > 1):
        # collectives were lost or dropped: their recorded sequence numbers (`j`) place the rest;
        # read again to keep them (a clean log, the usual case, does without: 8 bytes an event)
        return scan_bytes(data, path, limit, keep_seq=True)
    scan.good_bytes = stream.good_bytes
    scan.torn, scan.junk, scan.damage = stream.torn, stream.junk, stream.damage
    scan.malformed.update(stream.malformed)
    scan.duplicates = stream.duplicates
    scan.colls_written = stream.colls if stream.framed else len(scan.sig)
    if not scan.partial:
        scan.pending.update(scanner.pending())
    scan.sites = list(scanner.sites.values())
    scan.chain_sites = scanner.resolve_chains(set(scan.chain))
    scan.groups = [tuple(g) for g in scanner.groups]
    if not scan.threads:
        scan.threads.append("MainThread")
    return scan


class _Scanner:
    """The tables a log's records refer to (strings, sites, tensor specs, groups), and the loop
    that turns its records into a Scan's columns."""

    def __init__(self, scan: Scan, keep_seq: bool):
        self.scan = scan
        self.keep_seq = keep_seq
        self.completed = bytearray()  # per event: 1 once its completion (or error) was read
        self.strings: dict[int, str] = {}
        self.sites: dict[int, tuple] = {}
        self.chains: dict[int, list] = {}  # chain id -> site ids, outermost first
        self.tspecs: dict[int, tuple | None] = {}
        self.gslot: dict[int, int] = {}  # the file's group id -> group slot
        self.groups: list = []  # slot -> [name, ranks or None, desc]
        self.group_index: dict[str, int] = {}
        # a capped log: the frame that starts the current segment, where the group records
        # repeated from earlier segments are (creations already known are skipped)
        self.segment, self.dropped_now = 0, False
        self.snapshot_at = self.snapshot_index = self.known_creations = -1
        # collectives' keys seen and checked before: (signature fields, site, chain) of a collective of
        # only the usual keys -> (local signature id, its number of keys but `d`); with the other
        # fields that repeat too (`full`) -> local signature id
        self.plain: dict[tuple, tuple] = {}
        self.ext: dict[tuple, tuple] = {}  # (the same, with role, label, async, native and API: `collective`)
        self.full: dict[tuple, int] = {}
        self.a2a_sizes: dict[int, tuple] = {}  # local signature id -> all_to_all_single sizes

    def collective(self, rec: dict, done, at: int, eid: int, run: tuple) -> tuple | None:
        """(local signature id, group slot) of a collective off the hot path, its completions
        applied; None when it is left out: it does not match the schema (said in `malformed`), or
        it needs a string, tensor spec or group whose record was lost (`lost`). It is checked in
        full, and its keys kept for the hot loop's checks when they are of the usual kinds."""
        scan, get = self.scan, rec.get
        key = (get("o"), get("g"), get("t"), get("r"), get("p"), get("s"), get("ch"))
        ext = key + (get("u"), get("l"), get("a"), get("n"), get("x"))
        world = scan.header["world"]
        full = ext + (get("tag"), get("sp"), get("h"), get("st"))
        try:
            sid = self.full.get(full)
        except TypeError:  # a value that is not hashable: not in the schema (below)
            sid = None
        why = coll_problem(rec, world)
        if why is None and (sid is None or None in rec.values()):  # (a nil reads as absent in the keys)
            why = signature_problem(rec, world)
        if why is not None:
            scan.malformed.setdefault(at, why)
            scan.lost.append(eid)
            return None
        if done:
            self.complete(done, eid, *run)
        try:
            if sid is None:
                fields = _signature(rec, self.strings, self.tspecs)
                if len(self.full) >= _MAX_KEYS:  # (a log of endless distinct signatures: memory bounded)
                    self.full.clear()
                    self.ext.clear()
                    self.plain.clear()
                sid = self.full[full] = len(scan.signatures)
                scan.signatures.append(fields)
                if fields[0] == "alltoall_base_":
                    self.a2a_sizes[sid] = _a2a_sizes(rec, self.tspecs)
            g = self.gslot.get(key[1])
            if g is None:
                g = self.slot_of(key[1])
        except KeyError:  # it needs a record that was lost
            scan.lost.append(eid)
            return None
        if "ts" in rec and "j" in rec and ("d" not in rec or done):  # what the fast checks take as usual
            if _PLAIN_KEYS.issuperset(rec) and len(rec) <= _PLAIN_MOST:
                self.plain[key] = (sid, len(rec) - (1 if done else 0))
            elif _EXT_KEYS.issuperset(rec):
                self.ext[ext] = (sid, len(rec) - (1 if done else 0))
        return sid, g

    def read(self, stream: LogStream, limit: int | None) -> None:
        """The hot loop: collectives and their completions inline, the rest in `_other`."""
        scan, strings, tspecs, gslot = self.scan, self.strings, self.tspecs, self.gslot
        plain, ext = self.plain, self.ext
        a2a_sizes = self.a2a_sizes
        sig_append, gid_append = scan.sig.append, scan.gid.append
        off_append, seq_append, keep_seq = scan.off.append, scan.seq.append, self.keep_seq
        chain_append = scan.chain.append
        errors, unconfirmed, lost = scan.errors, scan.unconfirmed, scan.lost
        completed = self.completed
        pend_add = completed.append
        runs = scan.eid_runs  # [(event index, event id)] where the ids jump (dropped or damaged records)
        run_n = run_e = n = 0
        coll, done_kind, header_kind = lf.COLL, lf.DONE, lf.HEADER
        row, done3, done2 = TS_J.pack, DONE3.pack, DONE2.pack  # (logfile/records.py's ranges, checked in C)
        kind = None
        try:
            for at, rec, eid in stream:
                kind = rec["k"]
                if kind == coll:
                    # The schema (logfile/records.py), cheaply: a collective of only the usual keys (or those
                    # of torch's internals: role, label, async, native, API) whose signature, site and
                    # chain were seen (and checked) before needs ts, j (struct, in C) and its
                    # completions checked; any other goes the general way (`collective`: in full)
                    get = rec.get
                    done, s, ch = get("d", ()), get("s"), get("ch")
                    size = len(rec)
                    try:
                        row(get("ts"), get("j"))
                        if size <= _PLAIN_MOST:
                            key = (get("o"), get("g"), get("t"), get("r"), get("p"), s, ch)
                            hit = plain.get(key)
                            if hit is None:
                                key += (get("u"), get("l"), get("a"), get("n"), get("x"))
                                hit = ext.get(key)
                        else:
                            key = (get("o"), get("g"), get("t"), get("r"), get("p"), s, ch, get("u"), get("l"), get("a"),
                                   get("n"), get("x"))
                            hit = ext.get(key)
                        usual = hit is not None and done.__class__ is tuple and size == hit[1] + (done != ())
                    except (StructError, TypeError):  # (a value of the wrong type; one not hashable)
                        usual = False
                    if usual and done:  # completions of earlier collectives: [event ids back, ...] (format 2)
                        for entry in done:  # (a bad one leaves the record out: those before it stay)
                            try:
                                if entry.__class__ is not tuple:
                                    raise StructError
                                (done3 if len(entry) == 3 else done2)(*entry)
                            except StructError:
                                usual = False
                                break
                            back = entry[0]
                            i = eid - back - run_e + run_n
                            if not run_n <= i < n:
                                i = scan.event_of(eid - back)
                                if i is None:
                                    continue
                            completed[i] = 1
                            if len(entry) < 3:  # returned, completion not known
                                unconfirmed.append(i)
                    if usual:
                        sid = hit[0]
                        g = gslot[key[1]]
                    else:
                        found = self.collective(rec, done, at, eid, (run_n, run_e, n))
                        if found is None:
                            continue
                        sid, g = found
                    if a2a_sizes and sid in a2a_sizes:
                        scan.a2a[n] = a2a_sizes[sid]
                    if eid != run_e + n - run_n or runs[-1][1] < 0:
                        if runs[-1][1] < 0:
                            runs[-1] = (0, eid)  # the first collective after deleted segments
                        else:
                            runs.append((n, eid))
                        run_n, run_e = n, eid
                    sig_append(sid)
                    gid_append(g)
                    off_append(at)
                    chain_append(ch if ch is not None else -1 if s is None else -2 - s)
                    if keep_seq:
                        seq_append(get("j", 0))
                    pend_add(0)
                    n += 1
                    if n == limit:
                        scan.partial = True
                        break
                elif kind == done_kind:  # format 1, and errors
                    i = rec["i"] - run_e + run_n
                    if not run_n <= i < n:
                        i = scan.event_of(rec["i"])
                        if i is None:
                            continue
                    completed[i] = 1
                    if "e" in rec:
                        errors[i] = rec["e"]
                    elif "c" not in rec:
                        if "r" in rec:
                            unconfirmed.append(i)
                        else:
                            completed[i] = 0
                elif kind == header_kind and self.segment_start(rec, at):
                    n = run_n = run_e = 0  # segments were deleted before this one: start again
                else:
                    self._other(rec, at)
        except (KeyError, TypeError, IndexError, OverflowError, ValueError) as exc:  # (logfile/records.py should make it none)
            raise LogError(f"{shown(stream.path)}: malformed {shown(kind)!r} record ({type(exc).__name__})") from None

    def complete(self, done: tuple, eid: int, run_n: int, run_e: int, n: int) -> None:
        """The completions a collective carries (`d`), checked (the hot loop's slow path)."""
        scan = self.scan
        for entry in done:
            i = eid - entry[0] - run_e + run_n
            if not run_n <= i < n:
                i = scan.event_of(eid - entry[0])
                if i is None:
                    continue
            self.completed[i] = 1
            if len(entry) < 3:  # returned, completion not known
                scan.unconfirmed.append(i)

    def resolve_chains(self, keys: set) -> dict:
        """Each chain key's frames (see Scan.chain); a frame whose site record was lost is None."""
        sites, out = self.sites, {}
        for key in keys:
            if key >= 0:
                ids = self.chains.get(key)
                if type(ids) in (list, tuple) and ids:
                    out[key] = tuple(sites.get(i) if type(i) is int else None for i in ids)
            elif key < -1 and -2 - key in sites:
                out[key] = (sites[-2 - key],)
        return out

    def pending(self) -> list[int]:
        """The events whose completion was not read."""
        out, completed = [], self.completed
        i = completed.find(0)
        while i >= 0:
            out.append(i)
            i = completed.find(0, i + 1)
        return out

    def slot_of(self, local: int, name=None, ranks=None, desc="") -> int:
        """The slot of the file's group `local` (KeyError: a group whose record was lost)."""
        s = self.gslot.get(local)
        if s is None:
            if name is None:
                raise KeyError(local)
            s = self.group_index.get(name)
            if s is None:
                if len(self.groups) >= MAX_GROUPS:
                    raise KeyError(local)  # (its collectives are unreadable)
                s = self.group_index[name] = len(self.groups)
                self.groups.append([name, tuple(ranks) if ranks is not None else None, desc or ""])
            self.gslot[local] = s
        if ranks is not None and self.groups[s][1] is None:
            self.groups[s][1] = tuple(ranks)
        return s

    def segment_start(self, rec: dict, at: int) -> bool:
        """A later segment's header; True when segments before it were deleted (the log's cap):
        what was read so far is dropped, and the segment's counters tell where groups go on."""
        scan = self.scan
        seg = rec.get("seg", 0)
        self.snapshot_at, self.snapshot_index, self.known_creations = at, 0, len(scan.creations)
        gap = seg > self.segment + 1
        if gap:
            scan.dropped += max(len(scan.sig), 1)  # the deleted segments held collectives too
            scan.eid_runs[:] = [(0, -1)]  # set by the next collective
            for col in (scan.sig, scan.gid, scan.off, scan.seq, scan.chain):
                del col[:]
            for table in (scan.errors, scan.a2a):
                table.clear()
            del self.completed[:]
            del scan.unconfirmed[:], scan.lost[:]
            self.dropped_now = True
        self.segment = max(self.segment, seg)
        return gap

    def _other(self, rec: dict, at: int) -> None:
        """Every record but collectives and completions: tables, groups, the end of the log."""
        kind, scan, strings, sites = rec["k"], self.scan, self.strings, self.sites
        if kind == lf.STRING:
            strings[rec["i"]] = rec["s"]
        elif kind == lf.SITE:
            sites[rec["i"]] = (strings.get(rec["f"], "?"), rec["l"], strings.get(rec["n"], "?"))
        elif kind == lf.TSPEC:
            self.tspecs[rec["i"]] = _tspec(rec, strings)
        elif kind == lf.CHAIN:
            self.chains[rec["i"]] = rec["s"]
        elif kind == lf.THREAD:
            scan.threads.append(rec["n"])
        elif kind == lf.GROUP:
            if at == self.snapshot_at and rec.get("op", "seen") != "seen":  # repeated by a later segment
                self.snapshot_index += 1
                if not self.dropped_now or self.snapshot_index <= self.known_creations:
                    return
            _group(rec, self.slot_of, sites, scan.creations)
        elif kind == lf.COUNTERS and self.dropped_now:
            for key, last in rec["c"]:
                if key & (3 << 32) == 0 and key >> 34 in self.gslot:  # a group's collectives
                    scan.starts[self.gslot[key >> 34]] = last + 1
            self.dropped_now = False
        elif kind == lf.EXCEPTION:
            scan.exception = (rec.get("t", "?"), rec.get("m", ""), sites.get(rec.get("s")))
        elif kind == lf.TRAILER:
            scan.trailer = True
        elif kind == lf.STACKS:
            scan.watchdog.append(_stacks(rec))
        elif kind == lf.NON_MEMBER:
            scan.non_member.append((strings.get(rec["x"], "?"), sites.get(rec.get("s")), rec.get("ts", 0)))
        elif kind == lf.DISABLED:
            scan.disabled = rec.get("m", "")
        elif kind == lf.SYNC:
            scan.syncs.append((rec.get("ts", 0), sites.get(rec.get("s")), rec.get("i"), rec.get("w", "")))
        elif kind == lf.STEP:
            scan.steps.append((rec.get("ts", 0), rec.get("o", 0)))


def _tspec(rec: dict, strings: dict) -> tuple | None:
    """A tensor spec, None when a dtype string was lost (the records that use it are lost too)."""
    try:
        return tuple((strings[d], tuple(s)) for d, s in rec["t"])
    except KeyError:
        return None


def _stacks(rec: dict) -> dict:
    """A watchdog record as reports read it: its known keys only (logfile/records.py checked their types;
    nothing walks what it does not know), lists for arrays."""
    out = {k: rec[k] for k in ("i", "op", "waited_s", "ts") if k in rec}
    out["threads"] = [{"id": th.get("id"), "n": th.get("n", "?"), "f": [list(f) for f in th.get("f", ())]}
                      for th in rec.get("threads", ())]
    return out


def _signature(rec: dict, strings: dict, tspecs: dict) -> tuple:
    op = strings[rec["o"]]
    spec = WIRE_OPS.get(op)
    tensors = tspecs[rec["t"]] if "t" in rec else ()
    if tensors is None:
        raise KeyError(rec["t"])  # its tensor spec needs a string that was lost
    if op in SHAPE_FREE_OPS:
        tensors = tuple((d, ()) for d, _ in tensors)
    api = strings[rec["x"]] if "x" in rec else (spec.api if spec else op)
    role = strings[rec["u"]] if "u" in rec else None
    return (op, tensors, rec.get("r"), rec.get("p"), role, api, rec.get("tag") or 0)


def _a2a_sizes(rec: dict, tspecs: dict) -> tuple:
    """(input rows, elements per row, input splits, output splits) of an all_to_all_single record."""
    tensors = tspecs[rec["t"]] if "t" in rec else ()
    shape = tensors[0][1] if tensors else ()
    row = 1
    for d in shape[1:]:
        row *= d
    splits = rec.get("sp") or ((), ())
    ins, outs = tuple(splits[0]), tuple(splits[1]) if len(splits) > 1 else ()
    if not all(type(k) is int for k in (*shape, *ins, *outs)):
        raise TypeError("all_to_all_single sizes are not integers")  # a malformed record (LogError)
    return (shape[0] if shape else 1, row, ins, outs)


def _group(rec: dict, slot_of, sites: dict, creations: list) -> None:
    op = rec.get("op", "seen")
    ranks = rec.get("r")
    name = rec.get("g")
    desc = rec.get("d", "")
    if "gid" in rec and name is not None:
        try:
            slot_of(rec["gid"], name, ranks, desc)
        except KeyError:  # one group too many (MAX_GROUPS): its collectives are unreadable
            pass
    if op != "seen":
        creations.append((op, name, tuple(ranks) if ranks is not None else None, sites.get(rec.get("s")),
                          bool(rec.get("m", True)), desc, rec.get("ts") or 0, rec.get("us")))


def decode_event(path: str, offset: int, eid: int, cache: dict) -> tuple[dict, dict | None, dict]:
    """Decode the C record of event id `eid` at `offset` and find its D record after it.

    Returns (C record, D record or None, lookup tables). `cache` keeps the file's string,
    site, tensor-spec and thread tables between calls.
    """
    data = cache.get("data")
    if data is None:
        data = cache["data"] = read_bytes(path)
        tables = cache["tables"] = {"S": {}, "F": {}, "T": {}, "P": {}, "K": {}}
        # tables are small and appear before first use (the scan checked the collectives)
        for _, rec, _ in LogStream(data, path, expand_done=False, check_colls=False):
            k = rec["k"]
            if k == lf.STRING:
                tables["S"][rec["i"]] = rec["s"]
            elif k == lf.SITE:
                tables["F"][rec["i"]] = rec
            elif k == lf.CHAIN:
                tables["K"][rec["i"]] = rec["s"]
            elif k == lf.THREAD:
                tables["T"][rec.get("h", 0)] = rec["n"]
            elif k == lf.TSPEC:
                tables["P"][rec["i"]] = tuple((tables["S"].get(d, "?"), tuple(s)) for d, s in rec["t"])
    stream = LogStream(data, path, offset, check_colls=False)  # (it is one the scan checked)
    framed = stream.framed  # (format 1: offsets are a C record's own, format 2 its frame's)
    stream = iter(stream)
    coll = next((rec for _, rec, e in stream if rec["k"] == lf.COLL and (e == eid or not framed)), None)
    if coll is None:
        raise LogError(f"{shown(path)}: changed while it was read (collective {eid} is no longer at byte {offset})")
    done = None
    for _, (_, rec, _) in zip(range(100_000), stream):
        if rec["k"] == lf.DONE and rec.get("i") == eid:
            done = rec
            break
    return coll, done, cache["tables"]


def scan_many(paths: list[str], workers: int, limit: int | None = None) -> list[Scan]:
    """Scan files, in `workers` processes when it pays off (not for short previews)."""
    if workers <= 1 or len(paths) < 8 or (limit is not None and limit * len(paths) < 2_000_000):
        return [scan_file(p, limit) for p in paths]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else None
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        return list(pool.map(functools.partial(scan_file, limit=limit), paths,
                             chunksize=max(1, len(paths) // (workers * 8))))
