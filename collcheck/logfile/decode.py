"""The one record decoder: a log's records with the ids they hold resolved through its tables.

A log interns what repeats (docs/log-format.md): strings (S), call sites (F), call chains (K),
tensor specs (V) and threads (T) are defined once, by a record written before the first record
that uses them, and named by id after. `Tables` is the one place those records are read;
`Decoder` reads a log's records in order, takes the interning ones into its tables and yields
the others, every id they hold resolvable through the tables at that point. The scanner (its
columns: scan.py), an event's details (`LogFile`, for the run model) and replay's plan all read
logs through them.

Standard library and msgpack only, like the rest of the log layer.
"""

from __future__ import annotations

from . import format as lf
from .ops import SHAPE_FREE_OPS, WIRE_OPS
from .reader import LogError, LogStream, read_bytes, shown

INTERNED = frozenset((lf.STRING, lf.SITE, lf.CHAIN, lf.TSPEC, lf.THREAD))  # the kinds `Tables` takes
MAX_DONE_DISTANCE = 100_000  # records read after a collective to find its completion (LogFile.event)


class Tables:
    """What a log's interning records define, resolved as far as the log allows: a site whose
    string was lost names '?', a chain frame whose site was lost is None, a tensor spec whose
    dtype string was lost is None (the records that use it are unreadable)."""

    __slots__ = ("strings", "sites", "chains", "tspecs", "threads")

    def __init__(self):
        self.strings: dict[int, str] = {}
        self.sites: dict[int, tuple] = {}  # id -> (file, line, function)
        self.chains: dict[int, tuple] = {}  # id -> its frames (file, line, function), outermost first
        self.tspecs: dict[int, tuple | None] = {}  # id -> ((dtype, shape), ...)
        self.threads: dict[int, str] = {}  # h -> thread name

    def take(self, rec: dict) -> bool:
        """Enter an interning record (logfile/records.py checked its types); False: a record of
        another kind, left alone."""
        kind = rec["k"]
        if kind == lf.STRING:
            self.strings[rec["i"]] = rec["s"]
        elif kind == lf.SITE:
            strings = self.strings
            self.sites[rec["i"]] = (strings.get(rec["f"], "?"), rec["l"], strings.get(rec["n"], "?"))
        elif kind == lf.CHAIN:
            sites = self.sites
            self.chains[rec["i"]] = tuple(sites.get(i) if type(i) is int else None for i in rec["s"])
        elif kind == lf.TSPEC:
            self.tspecs[rec["i"]] = self._tspec(rec["t"])
        elif kind == lf.THREAD:
            self.threads[rec.get("h", 0)] = rec["n"]
        else:
            return False
        return True

    def _tspec(self, tensors) -> tuple | None:
        try:
            return tuple((self.strings[d], tuple(s)) for d, s in tensors)
        except KeyError:
            return None

    def chain_sites(self, keys) -> dict:
        """Each chain key's frames (outermost first): a chain id (>= 0), or -2 - site id for a call
        site alone (the scanner's file-local keys, scan.Scan.chain); keys not known are left out."""
        out = {}
        for key in keys:
            if key >= 0:
                frames = self.chains.get(key)
                if frames:
                    out[key] = frames
            elif key < -1 and -2 - key in self.sites:
                out[key] = (self.sites[-2 - key],)
        return out


class Decoder:
    """Every record of a stream (reader.LogStream) but the interning ones, as the stream yields
    them, (offset, record, event id); the interning ones go into `tables` on the way."""

    __slots__ = ("stream", "tables")

    def __init__(self, stream: LogStream, tables: Tables | None = None):
        self.stream = stream
        self.tables = Tables() if tables is None else tables

    def __iter__(self):
        take, interned = self.tables.take, INTERNED
        for item in self.stream:
            rec = item[1]
            if rec["k"] in interned:
                take(rec)
            else:
                yield item


def signature(rec: dict, tables: Tables) -> tuple:
    """A collective's signature fields (model.Signature's): op, tensors (dtypes only for the ops
    whose sizes may differ per rank), reduce op, root or peer, role, API, tag. KeyError: it
    needs a string or tensor spec whose record was lost."""
    strings = tables.strings
    op = strings[rec["o"]]
    spec = WIRE_OPS.get(op)
    tensors = tables.tspecs[rec["t"]] if "t" in rec else ()
    if tensors is None:
        raise KeyError(rec["t"])  # its tensor spec needs a string that was lost
    if op in SHAPE_FREE_OPS:
        tensors = tuple((d, ()) for d, _ in tensors)
    api = strings[rec["x"]] if "x" in rec else (spec.api if spec else op)
    role = strings[rec["u"]] if "u" in rec else None
    return (op, tensors, rec.get("r"), rec.get("p"), role, api, rec.get("tag") or 0)


def a2a_sizes(rec: dict, tables: Tables) -> tuple:
    """(input rows, elements per row, input splits, output splits) of an all_to_all_single record."""
    tensors = tables.tspecs[rec["t"]] if "t" in rec else ()
    shape = tensors[0][1] if tensors else ()
    row = 1
    for d in shape[1:]:
        row *= d
    splits = rec.get("sp") or ((), ())
    ins, outs = tuple(splits[0]), tuple(splits[1]) if len(splits) > 1 else ()
    if not all(type(k) is int for k in (*shape, *ins, *outs)):
        raise TypeError("all_to_all_single sizes are not integers")  # a malformed record (LogError)
    return (shape[0] if shape else 1, row, ins, outs)


class LogFile:
    """One log's bytes and tables, for decoding its collectives again where a report asks for
    them (model.RankLog.event: the scan kept only their offsets)."""

    def __init__(self, path: str):
        self.path = path
        self.data = read_bytes(path)
        self._tables: Tables | None = None

    @property
    def tables(self) -> Tables:
        """The whole file's tables (they are small, and defined before their first use)."""
        if self._tables is None:
            decoder = Decoder(LogStream(self.data, self.path, expand_done=False, check_colls=False))
            for _ in decoder:
                pass
            self._tables = decoder.tables
        return self._tables

    def event(self, offset: int, eid: int) -> tuple[dict, dict | None]:
        """The C record of event id `eid` at `offset` (a frame's, or a format 1 record's own), and
        the D record after it that completes it (None: none)."""
        stream = LogStream(self.data, self.path, offset, check_colls=False)  # (one the scan checked)
        framed = stream.framed
        records = iter(stream)  # (what its ids name is in `tables`)
        coll = next((rec for _, rec, e in records if rec["k"] == lf.COLL and (e == eid or not framed)), None)
        if coll is None:
            raise LogError(f"{shown(self.path)}: changed while it was read (collective {eid} is no longer at byte {offset})")
        for _, (_, rec, _) in zip(range(MAX_DONE_DISTANCE), records):
            if rec["k"] == lf.DONE and rec.get("i") == eid:
                return coll, rec
        return coll, None

    def events(self, eids: list[int]) -> list[tuple[dict, dict | None]] | None:
        """What `event` gives for each of `eids`, in one pass over the file (`event` reads from
        the event's frame on: minutes for millions); None for a format 1 log, or when the pass
        misses one of them."""
        wanted = set(eids)
        colls: dict[int, dict] = {}
        dones: dict[int, dict] = {}
        decoder = Decoder(LogStream(self.data, self.path, check_colls=False))  # (the scan checked those it kept)
        for _, rec, eid in decoder:
            k = rec["k"]
            if k == lf.COLL:
                if eid in wanted and eid not in colls:
                    colls[eid] = rec
            elif k == lf.DONE:
                done_of = rec.get("i")
                if done_of in colls and done_of not in dones:  # (the first after its C record)
                    dones[done_of] = rec
        if self._tables is None:
            self._tables = decoder.tables
        if not decoder.stream.framed or len(colls) < len(wanted):
            return None
        return [(colls[e], dones.get(e)) for e in eids]
