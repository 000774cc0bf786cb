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

Thousands of dumps: each is read once, in worker processes (parallel.py), into a summary of a
few KiB (summary.py); the run's facts come from the summaries. A usual pickled dump is read by the
compiled scanner (compiled.py) straight into columns, any other by the unpickler (load.py) and the
checks of columns.py or schema.py. Ranks whose logs would end with the
same checkpoint (the same collectives, signatures and open ones: of one kind, as model/load.py
groups them) share a log: the first of each kind is converted in full, the others get its bytes
behind their own header. No more than one dump per worker is held at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zlib
from dataclasses import dataclass, field

import msgpack

from ...base import __version__, progress
from ...base.settings import Settings
from ...logfile import format as lf
from ...logfile.checkpoint import checkpoint_record
from ...logfile.frames import frame_at
from ...logfile.reader import LogError
from ...logfile.writer import open_exclusive
from .columns import Columns, usual_columns
from .compiled import library, scan_dump
from .entries import group_order
from .load import decode_bytes, decode_dump, read_dump_bytes
from .parallel import chunk_size, keep, pool_size, run_all
from .rank_log import LOG_NAME, RankPlan, RankWriter, RunFacts, rank_header

_PACK = msgpack.Packer(use_bin_type=True).pack
from .schema import MAX_RANKS, check_entries, dump_head, dump_of
from .summary import UNDECIDED, RankSummary, summarize

CONVERTER = 13  # bump when the conversion changes: cached conversions are redone
MAX_UNNAMED = 1 << 12  # ranks below the largest one that no dump names (their dumps missing)
SHARE_FROM = 8  # ranks from which ranks of one kind share a log (model/load.py's FOLD_FROM), and dumps
# from which they are read in worker processes
_RANK_IN_NAME = re.compile(r"(\d+)$", re.ASCII)


@dataclass
class Plan:
    """What the dumps' summaries decided: the run's facts, each rank's plan, and the ranks of each
    kind (the first converted in full, the others given its log)."""

    summaries: dict[int, RankSummary]  # by rank
    facts: RunFacts
    plans: dict[int, RankPlan]
    kinds: list[list[int]]
    workers: int  # worker processes (0: this one)
    crcs: dict[int, int] = field(default_factory=dict)  # rank -> crc32 of its dump when first read


def cache_root() -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "collcheck", "fr")


def convert(paths: list[str], cache: str | None = None, workers: int | None = None) -> str:
    """Convert the dumps (one per rank) once; the directory of their logs (cached by content).
    Each file's kind and size are checked before it is read; a conversion is written into a
    temporary folder renamed into place when complete, and removed whatever ends it early.
    `workers`: processes that read the dumps (default: COLLCHECK_WORKERS, else one per CPU)."""
    ranks = _ranks_of(paths)  # names no job writes, two dumps of a rank: said before anything is read
    if workers is None:
        workers = Settings.from_env().check("COLLCHECK_WORKERS").workers or (os.cpu_count() or 1)
    digest = hashlib.sha1(f"{CONVERTER} {__version__}".encode())
    crcs = {}
    for p, rank, (content, crc) in zip(paths, ranks, _fingerprints(paths, workers)):
        digest.update(os.path.basename(p).encode(errors="surrogateescape") + b"\0" + content.encode() + b"\0")
        crcs[rank] = crc
    root = cache or cache_root()
    out = os.path.join(root, digest.hexdigest()[:20])
    if _cached(out, root):
        return os.path.join(out, "run")
    plan = _plan(dict(zip(ranks, paths)), crcs, pool_size(len(paths), workers, SHARE_FROM))
    try:
        os.makedirs(root, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f"{os.path.basename(out)}.tmp", dir=root)
    except OSError as exc:
        raise LogError(f"cannot write converted Flight Recorder dumps under {root} ({exc.strerror or exc})") from None
    try:
        run_dir = os.path.join(tmp, "run")
        os.mkdir(run_dir)
        _write_logs(plan, run_dir)
        with open(os.path.join(tmp, "done"), "w") as f:
            json.dump({"sources": [os.path.abspath(p) for p in paths]}, f)
        os.rename(tmp, out)  # (a folder is never renamed onto a link, nor moved into one)
    except OSError as exc:
        if not _cached(out, root):  # else: another process converted them meanwhile
            raise LogError(f"cannot write converted Flight Recorder dumps under {root} "
                           f"({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already when renamed into place
    return os.path.join(out, "run")


def _cached(out: str, root: str) -> bool:
    """Whether `out` is a finished conversion, a folder holding `done`; a link there is not one (it
    is removed, never followed: conversions are folders renamed into place)."""
    try:
        if os.path.islink(out):
            os.unlink(out)
    except OSError as exc:
        raise LogError(f"cannot use converted Flight Recorder dumps under {root} ({exc.strerror or exc})") from None
    done = os.path.join(out, "done")
    return os.path.isdir(out) and os.path.isfile(done) and not os.path.islink(done)


def _fingerprints(paths: list[str], workers: int) -> list[tuple[str, int]]:
    """(sha1, crc32) of each file's bytes, in `workers` threads (hashing and reading release the
    interpreter: 400 MB take a second on one core)."""
    def one(path: str) -> tuple[str, int]:
        data = read_dump_bytes(path)
        return hashlib.sha1(data).hexdigest(), zlib.crc32(data)

    if workers <= 1 or len(paths) < SHARE_FROM:
        return [one(p) for p in paths]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(min(workers, 8)) as pool:
        return list(pool.map(one, paths))


def _rank_of(path: str) -> int:
    """The rank in the dump's name, as torch names them (`<TORCH_FR_DUMP_TEMP_FILE><rank>`; a dump
    does not hold its rank)."""
    m = _RANK_IN_NAME.search(os.path.basename(path))
    if m is None:
        raise LogError(f"{path}: cannot tell which rank wrote this Flight Recorder dump (torch names them "
                       f"<prefix><rank>, e.g. comm_lib_trace_rank_0)")
    digits = m.group(1).lstrip("0") or "0"
    if len(digits) > 7 or int(digits) >= MAX_RANKS:
        raise LogError(f"{path}: rank {digits[:20]} in the file name is beyond any job's ({MAX_RANKS} ranks)")
    return int(digits)


def _ranks_of(paths: list[str]) -> list[int]:
    seen: dict[int, str] = {}
    for p in paths:
        rank = _rank_of(p)
        if rank in seen:
            raise LogError(f"two Flight Recorder dumps for rank {rank}: {seen[rank]} and {p}; "
                           "pass the dumps of one run")
        seen[rank] = p
    return list(seen)


# ------------------------------------------------------------------------------------------------
# reading: one summary per dump
# ------------------------------------------------------------------------------------------------

def _summary_of(job: tuple, fast: bool = True) -> RankSummary:
    """A dump's summary (in a worker process: `fast`, the C unpickler under its limits)."""
    rank, path, crc = job
    data = read_dump_bytes(path)
    _same_file(path, crc, zlib.crc32(data))
    scanned = scan_dump(path, data)  # (the usual dump: compiled; None for any other)
    if scanned is not None:
        return summarize(rank, path, *scanned)
    decoded = decode_bytes(path, data, fast)
    keep(decoded.raw)  # (in a worker: freed by its exit, not object by object)
    head, entries, budget = dump_head(path, decoded.raw, decoded.size)
    cols = usual_columns(entries, budget)
    if cols is None:
        check_entries(path, head, entries, budget)
        cols = Columns.of_entries(head["entries"])
    return summarize(rank, path, head, cols)


def _summary_here(job: tuple) -> RankSummary:
    return _summary_of(job, fast=False)


def _same_file(path: str, crc: int, now: int) -> None:
    if crc != now:
        raise LogError(f"{path}: changed while the Flight Recorder dumps were converted; run the command again")


def _plan(paths: dict[int, str], crcs: dict[int, int], workers: int) -> Plan:
    """Every dump read (in `workers` processes), the run's facts and each rank's plan."""
    jobs = [(rank, path, crcs[rank]) for rank, path in paths.items()]
    library()  # (built or loaded here once, before the workers are forked)
    got: dict[int, RankSummary] = {}
    tables: dict = {}  # one copy of each distinct group table (a world of ranks in each summary)
    results = run_all(_summary_of, jobs, workers, _summary_here, chunk_size(len(jobs), workers))
    for i, summary in progress.tracked("converting Flight Recorder dumps", results, len(jobs)):
        key = repr(sorted(summary.pg_config.items()))
        summary.pg_config = tables.setdefault(key, summary.pg_config)
        got[i] = summary
    summaries = [got[i] for i in range(len(jobs))]  # (the dumps' order: the facts take the first description)
    empty = sorted(s.rank for s in summaries if not s.entries)
    if len(empty) == len(summaries):
        raise LogError(f"no entries in any of the {len(summaries)} Flight Recorder dumps: dumped after "
                       "destroy_process_group, with the recorder off (TORCH_FR_BUFFER_SIZE=0), or a gloo job "
                       "that only sent and received (gloo records no send/recv)")
    unchecked = [(f"rank(s) {', '.join(map(str, empty))}: the Flight Recorder dump holds no entries (dumped after "
                  "destroy_process_group, or with the recorder off): not checked")] if empty else []
    facts = _facts(summaries, unchecked)
    by_rank = {s.rank: s for s in sorted(summaries, key=lambda s: s.rank)}
    plans = {rank: _rank_plan(s, facts) for rank, s in by_rank.items()}
    kinds: dict = {}
    for rank, s in by_rank.items():
        key = _kind_key(s, plans[rank]) if len(by_rank) >= SHARE_FROM else rank
        kinds.setdefault(key, []).append(rank)
    return Plan(by_rank, facts, plans, list(kinds.values()), workers, crcs)


def _rank_plan(s: RankSummary, facts: RunFacts) -> RankPlan:
    """The rank's checkpoint (every group of its log and P2P channel: count and rolling hash; a
    group without a collective counts 0) and its collectives not completed."""
    gids = facts.gids
    sequences: dict[int, tuple] = {}
    for (group, low), (value, h, p2p) in s.channels.items():
        count = value if p2p else max(value - facts.seq_base.get(group, 1), 0) + 1
        sequences[(gids[group] << 34) | low] = (count, h)
    for name in set(s.groups) | facts.member_of.get(s.rank, set()):
        sequences.setdefault(gids[name] << 34, (0, 0))
    open_eids, unconfirmed = [], []
    for eid, how, group, seq, gloo in s.not_done:
        if how == UNDECIDED and (group, seq) in facts.joined:
            continue  # a peer counted it completed, and it completes only once every member joined
        open_eids.append(eid)
        if gloo:
            unconfirmed.append(eid)
    checkpoint = checkpoint_record(s.blocks, [(k, n, h) for k, (n, h) in sequences.items()], "dump", open_eids)
    return RankPlan(checkpoint, frozenset(open_eids), tuple(unconfirmed))


def _kind_key(s: RankSummary, plan: RankPlan):
    """What ranks sharing a log have equal: what model/load.py compares (the checkpoint, how the
    log ends, the backend). A wrapped buffer's log (segments) is its own."""
    if s.wrapped:
        return s.rank
    cp = plan.checkpoint
    return (",".join(sorted(s.backends - {""})), cp["n"], tuple(map(tuple, cp["c"])), tuple(cp.get("o", ())),
            plan.unconfirmed)


# ------------------------------------------------------------------------------------------------
# groups
# ------------------------------------------------------------------------------------------------

def group_members(summaries: list[RankSummary]) -> tuple[dict[str, tuple], dict[str, str], bool, int]:
    """group name -> global ranks, group name -> description, whether the membership had to be
    reconstructed from the entries (torch 2.13's gloo writes every group's `pg_config` under one
    empty name, before the group has one), and the world size.

    Every report has a line per rank of the world, so the world is bounded by the ranks the dumps
    name (their file names, their group tables), not by the largest number one of them holds."""
    members: dict[str, set] = {}
    descs: dict[str, str] = {}
    broken = False
    named = {s.rank for s in summaries}
    for s in summaries:
        config = s.pg_config  # checked: every rank below MAX_RANKS (schema.py)
        if "" in config:
            broken = True
            # the ranks of *some* group of the run: no use for membership, but ranks that exist
            # (a rank that left no dump is then said to be missing)
            named.update(config[""]["ranks"])
            continue
        for name, info in config.items():
            if info["ranks"]:
                members.setdefault(name, set()).update(info["ranks"])
                descs.setdefault(name, info["desc"])
    for ranks in members.values():
        named |= ranks
    world = max(named) + 1
    if world - len(named) > MAX_UNNAMED:
        raise LogError(f"the Flight Recorder dumps name rank {world - 1} but only {len(named)} ranks in all: "
                       f"not the dumps of one job (more than {MAX_UNNAMED} ranks below it named nowhere)")
    for s in summaries:
        for name, desc in s.groups.items():
            if name not in members or broken:
                members.setdefault(name, set()).add(s.rank)
                descs.setdefault(name, desc)
    if "0" in members:  # the default group holds every rank
        members["0"] |= set(range(world))
    return {n: tuple(sorted(r)) for n, r in members.items()}, descs, broken, world


def _facts(summaries: list[RankSummary], unchecked: list[str]) -> RunFacts:
    """What every rank's log needs from all the dumps (the dumps' order: `summaries`)."""
    members, descs, broken, world = group_members(summaries)
    names: dict = {}
    base: dict[str, int] = {}
    last_j: dict[str, int] = {}
    for s in summaries:
        for pg_id, groups in s.pg_ids.items():
            names.setdefault(pg_id, set()).update(groups)
        base.update((g, 1) for g in s.groups if g not in base)
    for s in summaries:
        base.update((g, 0) for g in s.seq0)
    for s in summaries:
        for g, seq in s.max_seq.items():
            last_j[g] = max(last_j.get(g, -1), seq - base[g])
    member_of: dict[int, set] = {}
    for name, ranks in members.items():
        for r in ranks:
            member_of.setdefault(r, set()).add(name)
    return RunFacts(
        world=world, members=members, descs=descs,
        base=min((s.first_ns for s in summaries if s.first_ns > 0), default=0),
        notes=_gaps(summaries, broken), unchecked=unchecked + _alone(broken, members),
        joined={(g, seq) for g, first, last in {(g, *run) for s in summaries for g, runs in s.joined.items()
                                                for run in runs} for seq in range(first, last + 1)},
        pg_names={i: next(iter(n)) for i, n in names.items() if len(n) == 1 and i is not None}, last_j=last_j,
        seq_base=base, gids={name: i for i, name in enumerate(sorted(members, key=group_order))}, member_of=member_of)


def _gaps(summaries: list[RankSummary], broken: bool) -> list[str]:
    """The checks this input cannot support, said in the report instead of implied passed."""
    notes = [("read from PyTorch Flight Recorder dumps: they record no reduce op, no root of "
              "broadcast/reduce/gather/scatter, no tag, no all_to_all split sizes and no purpose (DDP "
              "buckets, join), so those were not compared")]
    if any("gloo" in s.backends for s in summaries):
        notes.append("gloo's Flight Recorder records no send/recv: point-to-point ops were not checked, and "
                     "it marks every op 'scheduled' and updates its counters late: completion is known only "
                     "where the counters or a peer show it")
    for s in sorted(summaries, key=lambda s: s.rank):
        if s.damaged:
            notes.append(f"rank {s.rank}'s Flight Recorder dump: {s.damaged} damaged entr"
                         f"{'y' if s.damaged == 1 else 'ies'} left out ({s.damage})")
    if broken:
        notes.append("the dumps' group table (pg_config) is broken, as torch 2.13 writes it on gloo: group "
                     "members were reconstructed from the ranks whose entries use each group")
    return notes


def _alone(broken: bool, members: dict[str, tuple]) -> list[str]:
    """Groups that nothing could be compared in: reconstructed from one rank's entries only."""
    alone = sorted((n for n, r in members.items() if len(r) == 1 and n != "0"), key=group_order) if broken else []
    if not alone:
        return []
    return [(f"group(s) {', '.join(alone)}: only one rank's entries use each, so nothing of them could be "
             "compared (their other members, if any, are not known)")]


# ------------------------------------------------------------------------------------------------
# writing: the first rank of each kind in full, the others its log behind their own header
# ------------------------------------------------------------------------------------------------

_job: tuple | None = None  # (plan, run directory) of the logs being written: what forked workers see


def _write_logs(plan: Plan, run_dir: str) -> None:
    global _job
    _job = (plan, run_dir)
    try:
        firsts = [kind[0] for kind in plan.kinds]
        written = run_all(_write_full, firsts, min(plan.workers, len(firsts)), _write_full_here)
        for _ in progress.tracked("writing converted logs", _each_rank(plan, run_dir, written), len(plan.summaries)):
            pass
    finally:
        _job = None


def _each_rank(plan: Plan, run_dir: str, written):
    """Yields once per rank written: the first of each kind as its worker finishes, then the others."""
    paths = {}
    for i, path in written:
        paths[plan.kinds[i][0]] = path
        yield
    for kind in plan.kinds:
        if len(kind) == 1:
            continue
        with open(paths[kind[0]], "rb") as f:
            data = f.read()
        found = frame_at(data, 0)  # the header's frame: the rest is what ranks of the kind share
        body = memoryview(data)[found[1]:]
        for rank in kind[1:]:
            s = plan.summaries[rank]
            header = rank_header(rank, s.path, s.version, s.backends, plan.facts, list(plan.facts.unchecked), False)
            fd, _ = open_exclusive(run_dir, LOG_NAME.format(rank=rank))
            with os.fdopen(fd, "wb") as f:
                f.write(lf.frame(_PACK(header), 0))
                f.write(body)
            yield


def _write_full(rank: int, fast: bool = True) -> str:
    """Convert one rank's dump into its log (in a worker: `fast`); the log's path."""
    plan, run_dir = _job
    s = plan.summaries[rank]
    decoded = decode_dump(s.path, fast)
    _same_file(s.path, plan.crcs[rank], decoded.crc)
    dump = dump_of(s.path, decoded.raw, decoded.size)
    return RankWriter(rank, s.path, dump, plan.facts, plan.plans[rank]).write(run_dir)


def _write_full_here(rank: int) -> str:
    """_write_full in this process, after a worker died: what it may have begun is removed first."""
    run_dir = _job[1]
    name = LOG_NAME.format(rank=rank)
    for f in os.listdir(run_dir):
        if f.startswith(name + "."):
            os.unlink(os.path.join(run_dir, f))
    return _write_full(rank, fast=False)
