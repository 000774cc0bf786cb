"""The loop that fills a Scan's columns (scan.py) from a log's records: the hot path of loading a
run. A collective whose signature, site and chain were seen before is taken with a few dict
lookups and struct checks; the rest goes the general way, checked in full against the schema
(logfile/records.py)."""

from __future__ import annotations

from array import array
from struct import error as StructError

from . import format as lf
from .compiled import library
from .decode import Decoder, Tables, a2a_sizes, signature
from .fastscan import read_compiled
from .ops import SHAPE_FREE_OPS
from .reader import LogError, LogStream, shown
from .records import DONE2, DONE3, TS_J, coll_problem, signature_problem

MAX_GROUPS = 1 << 20  # groups of one log (beyond: their collectives are unreadable)
NARROW_SLOTS = 0xFFFF  # group slots kept in 16 bits per collective until a log has more groups

# A collective of other keys than these goes the hot loop's general way (`Scanner.collective`)
_PLAIN_KEYS = frozenset(("k", "o", "g", "t", "r", "p", "s", "ch", "ts", "j", "d"))
_EXT_KEYS = _PLAIN_KEYS | {"u", "l", "a", "n", "x"}
_PLAIN_MOST = 10  # keys of a collective looked up among the plain ones first (more: torch's internals)
_MAX_KEYS = 1 << 20  # collectives' keys kept (the hot loop's cache)


class Scanner:
    """The loop that turns a log's records into a Scan's columns, and what it keeps on the way: the
    log's tables (decode.Tables), its groups, the collectives' keys already checked."""

    def __init__(self, scan, keep_seq: bool):
        """`scan`: the scan.Scan it fills."""
        self.scan = scan
        self.keep_seq = keep_seq
        self.completed = bytearray()  # per event: 1 once its completion (or error) was read
        self.tables = Tables()
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
        self.shape_free: set[int] = set()  # local signature ids of the ops whose signatures leave sizes out
        # for the compiled loop (fastscan.py): the keys of `plain` and `ext` set since it last looked
        # (None: all cleared), the groups given a slot since
        self.changed: list = []
        self.new_slots: list[tuple[int, int]] = []

    def collective(self, rec: dict, done, at: int, eid: int, run: tuple) -> tuple | None:
        """(local signature id, group slot) of a collective off the hot path, its completions
        applied; None when it is left out: it does not match the schema (said in `malformed`), or
        it needs a string, tensor spec or group whose record was lost (`lost`). It is checked in
        full, and its keys kept for the hot loop's checks when they are of the usual kinds."""
        scan, get = self.scan, rec.get
        key = (get("o"), get("t"), get("r"), get("p"), get("s"), get("ch"))
        ext = key + (get("u"), get("l"), get("a"), get("n"), get("x"))
        world = scan.header["world"]
        full = ext + (get("tag"), get("sp"), get("h"), get("st"))
        try:
            sid = self.full.get(full)
            g = self.gslot.get(get("g"))
        except TypeError:  # a value that is not hashable: not in the schema (below)
            sid = g = None
        why = coll_problem(rec, world)
        if why is None and (sid is None or g is None or None in rec.values()):  # (a nil reads as absent in the keys)
            why = signature_problem(rec, world)
        if why is not None:
            scan.malformed.setdefault(at, why)
            scan.lost.append(eid)
            return None
        if done:
            self.complete(done, eid, *run, ts=get("ts"))
        try:
            if sid is None:
                fields = signature(rec, self.tables)
                if len(self.full) >= _MAX_KEYS:  # (a log of endless distinct signatures: memory bounded)
                    self.full.clear()
                    self.ext.clear()
                    self.plain.clear()
                    self.changed.append(None)
                sid = self.full[full] = len(scan.signatures)
                scan.signatures.append(fields)
                if fields[0] == "alltoall_base_":
                    self.a2a_sizes[sid] = a2a_sizes(rec, self.tables)
                if fields[0] in SHAPE_FREE_OPS:
                    self.shape_free.add(sid)
            if g is None:
                g = self.slot_of(get("g"))
        except KeyError:  # it needs a record that was lost
            scan.lost.append(eid)
            return None
        if "ts" in rec and "j" in rec and ("d" not in rec or done):  # what the fast checks take as usual
            if _PLAIN_KEYS.issuperset(rec) and len(rec) <= _PLAIN_MOST:
                self.plain[key] = (sid, len(rec) - (1 if done else 0))
                self.changed.append(key)
            elif _EXT_KEYS.issuperset(rec):
                self.ext[ext] = (sid, len(rec) - (1 if done else 0))
                self.changed.append(ext)
        return sid, g

    def usual(self, rec: dict) -> tuple | None:
        """(local signature id, keys but a non-empty `d`) that the hot loop's lookups give the
        next collective of `rec`'s keys (`consume`, which makes them inline), None: it would go the
        general way."""
        get = rec.get
        key = (get("o"), get("t"), get("r"), get("p"), get("s"), get("ch"))
        try:
            hit = self.plain.get(key) if len(rec) <= _PLAIN_MOST else None
            if hit is None:
                hit = self.ext.get(key + (get("u"), get("l"), get("a"), get("n"), get("x")))
        except TypeError:  # (a value that is not hashable)
            return None
        done = get("d", ())
        if hit is None or done.__class__ is not tuple or len(rec) != hit[1] + (done != ()):
            return None
        return hit

    def read(self, stream: LogStream, limit: int | None) -> None:
        """Every record of the stream: by the compiled loop and this one (fastscan.py) where the
        compiled one was built, else by this one alone."""
        lib = library() if stream.framed and stream.start == 0 else None
        if lib is None:
            self.consume(Decoder(stream, self.tables), stream.path, limit)
        else:
            read_compiled(self, stream, limit, lib)

    def consume(self, records, path: str, limit: int | None) -> None:
        """The hot loop over `records` ((offset, record, event id), the interning ones taken out by
        decode.Decoder): collectives and their completions inline, the rest in `_other`. It goes on
        from where the scan is (the compiled loop may have read the collectives before)."""
        scan, gslot = self.scan, self.gslot
        plain, ext = self.plain, self.ext
        a2a_sizes = self.a2a_sizes
        sig_append, gid_append = scan.sig.append, scan.gid.append
        off_append, seq_append, keep_seq = scan.off.append, scan.seq.append, self.keep_seq
        chain_append = scan.chain.append
        errors, unconfirmed = scan.errors, scan.unconfirmed
        completed = self.completed
        pend_add = completed.append
        timing = scan.times is not None  # (the statistics' columns too: `_times_of`)
        runs = scan.eid_runs  # [(event index, event id)] where the ids jump (dropped or damaged records)
        n = len(scan.sig)
        run_n, run_e = runs[-1][0], max(runs[-1][1], 0)
        coll, done_kind, header_kind, group_kind = lf.COLL, lf.DONE, lf.HEADER, lf.GROUP
        row, done3, done2 = TS_J.pack, DONE3.pack, DONE2.pack  # (logfile/records.py's ranges, checked in C)
        kind = None
        try:
            for at, rec, eid in records:
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
                            key = (get("o"), get("t"), get("r"), get("p"), s, ch)
                            hit = plain.get(key)
                            if hit is None:
                                key += (get("u"), get("l"), get("a"), get("n"), get("x"))
                                hit = ext.get(key)
                        else:
                            key = (get("o"), get("t"), get("r"), get("p"), s, ch, get("u"), get("l"), get("a"),
                                   get("n"), get("x"))
                            hit = ext.get(key)
                        g = gslot.get(get("g"))  # (keys leave the group out: a job may use 100,000 groups)
                        usual = (hit is not None and g is not None and done.__class__ is tuple
                                 and size == hit[1] + (done != ()))
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
                            if timing:
                                self._done_time(i, (get("ts") or 0) - entry[-1])
                    if usual:
                        sid = hit[0]
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
                    if timing:
                        self._times_of(get, n, sid, s)
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
                    if timing:
                        self._done_time(i, rec.get("c", rec.get("r", 0)))
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
                    if kind == group_kind:
                        gid_append = scan.gid.append  # (wider past NARROW_SLOTS groups: slot_of)
        except (KeyError, TypeError, IndexError, OverflowError, ValueError) as exc:  # (logfile/records.py should make it none)
            raise LogError(f"{shown(path)}: malformed {shown(kind)!r} record ({type(exc).__name__})") from None

    def complete(self, done: tuple, eid: int, run_n: int, run_e: int, n: int, ts: int | None = None) -> None:
        """The completions a collective carries (`d`), checked (the hot loop's slow path); `ts`: its."""
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
            if scan.times is not None:
                self._done_time(i, (ts or 0) - entry[-1])

    def _times_of(self, get, n: int, sid: int, site) -> None:
        """The statistics' columns (scan.Times) of collective n, as decode.LogFile.events gives it."""
        t = self.scan.times
        t.issued.append(get("ts", 0))
        t.site.append(-1 if site is None else site)
        t.flags.append((1 if get("a") else 0) | (2 if get("n") else 0))
        t.done.append(0)
        t.timed.append(0)
        if sid in self.shape_free:
            t.tensors[n] = get("t")

    def _done_time(self, i: int, at: int) -> None:
        """Event i's completion record says `at` (µs since the origin; the first one read counts)."""
        t = self.scan.times
        if not t.timed[i]:
            t.timed[i] = 1
            try:
                t.done[i] = at
            except OverflowError:  # (two int64s apart: a log from nothing real)
                t.wide = True

    def resolve_times(self, times) -> None:
        """At the end of the log: sites as positions in Scan.sites, tensor spec ids as their specs
        (an id not defined: left out, the signature's stand)."""
        ids = list(self.tables.sites)
        if ids != list(range(len(ids))):
            at = {sid: k for k, sid in enumerate(ids)}
            times.site = array("i", [at.get(s, -1) for s in times.site])
        elif times.site and max(times.site) >= len(ids):
            times.site = array("i", [s if s < len(ids) else -1 for s in times.site])
        specs = self.tables.tspecs
        times.tensors = {i: specs[t] for i, t in times.tensors.items() if t in specs}

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
                if s > NARROW_SLOTS and self.scan.gid.typecode == "H":
                    self.scan.gid = array("I", self.scan.gid)  # (the hot loop binds the new column's append)
            self.gslot[local] = s
            self.new_slots.append((local, s))
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
            if scan.times is not None:
                scan.times.clear()
            del scan.unconfirmed[:], scan.lost[:]
            self.dropped_now = True
        self.segment = max(self.segment, seg)
        return gap

    def _other(self, rec: dict, at: int) -> None:
        """Every record but collectives, completions and the tables': groups, the end of the log."""
        kind, scan, strings, sites = rec["k"], self.scan, self.tables.strings, self.tables.sites
        if kind == lf.GROUP:
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
            scan.stop_error = rec.get("e")
        elif kind == lf.SYNC:
            scan.syncs.append((rec.get("ts", 0), sites.get(rec.get("s")), rec.get("i"), rec.get("w", "")))
        elif kind == lf.STEP:
            scan.steps.append((rec.get("ts", 0), rec.get("o", 0)))
        elif kind == lf.SOURCE:
            i = scan.event_of(rec["i"])
            if i is not None:
                scan.sources[i] = rec["p"]
        elif kind == lf.FILE and rec["f"] in strings:
            seen = scan.files.setdefault(strings[rec["f"]], {})
            seen.update((k, rec[k]) for k in ("s", "m", "h") if k in rec)


def _stacks(rec: dict) -> dict:
    """A watchdog record as reports read it: its known keys only (logfile/records.py checked their types;
    nothing walks what it does not know), lists for arrays."""
    out = {k: rec[k] for k in ("i", "op", "waited_s", "ts") if k in rec}
    out["threads"] = [{"id": th.get("id"), "n": th.get("n", "?"), "f": [list(f) for f in th.get("f", ())]}
                      for th in rec.get("threads", ())]
    return out


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
