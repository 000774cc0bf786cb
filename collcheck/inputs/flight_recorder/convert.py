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
import shutil
import tempfile
from dataclasses import dataclass, field

from ...base import __version__
from ...logfile.reader import LogError
from .entries import SYMMETRIC, backend_of, group_of, group_order, op_of, seq_of
from .load import load_dump, read_dump_bytes
from .rank_log import RankWriter, RunFacts, completed_by_counter
from .schema import MAX_RANKS

CONVERTER = 12  # bump when the conversion changes: cached conversions are redone
MAX_UNNAMED = 1 << 12  # ranks below the largest one that no dump names (their dumps missing)
_RANK_IN_NAME = re.compile(r"(\d+)$", re.ASCII)


@dataclass
class Dumps:
    """One run's dumps: rank -> (path, dump)."""

    by_rank: dict[int, tuple[str, dict]]
    unchecked: list[str] = field(default_factory=list)  # ranks whose dumps hold nothing


def cache_root() -> str:
    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "collcheck", "fr")


def convert(paths: list[str], cache: str | None = None) -> str:
    """Convert the dumps (one per rank) once; the directory of their logs (cached by content).
    Each file's kind and size are checked before it is read; a conversion is written into a
    temporary folder renamed into place when complete, and removed whatever ends it early."""
    for p in paths:
        _rank_of(p)  # a name no job writes: said before anything is read
    digest = hashlib.sha1(f"{CONVERTER} {__version__}".encode())
    for p in paths:
        digest.update(os.path.basename(p).encode(errors="surrogateescape") + b"\0")
        digest.update(read_dump_bytes(p))
    root = cache or cache_root()
    out = os.path.join(root, digest.hexdigest()[:20])
    if os.path.exists(os.path.join(out, "done")):
        return os.path.join(out, "run")
    dumps = _rank_dumps(paths)
    try:
        os.makedirs(root, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f"{os.path.basename(out)}.tmp", dir=root)
    except OSError as exc:
        raise LogError(f"cannot write converted Flight Recorder dumps under {root} ({exc.strerror or exc})") from None
    try:
        run_dir = os.path.join(tmp, "run")
        os.mkdir(run_dir)
        _write_logs(dumps, run_dir)
        with open(os.path.join(tmp, "done"), "w") as f:
            json.dump({"sources": [os.path.abspath(p) for p in paths]}, f)
        os.rename(tmp, out)
    except OSError as exc:
        if not os.path.exists(os.path.join(out, "done")):  # else: another process converted them meanwhile
            raise LogError(f"cannot write converted Flight Recorder dumps under {root} "
                           f"({exc.strerror or exc})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone already when renamed into place
    return os.path.join(out, "run")


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


def _rank_dumps(paths: list[str]) -> Dumps:
    """Each dump by its rank; the dumps read and checked (fr_schema.py)."""
    by_rank: dict[int, tuple[str, dict]] = {}
    for p in paths:
        rank = _rank_of(p)
        if rank in by_rank:
            raise LogError(f"two Flight Recorder dumps for rank {rank}: {by_rank[rank][0]} and {p}; "
                           "pass the dumps of one run")
        by_rank[rank] = (p, load_dump(p))
    empty = sorted(r for r, (_, d) in by_rank.items() if not d["entries"])
    if len(empty) == len(by_rank):
        raise LogError(f"no entries in any of the {len(by_rank)} Flight Recorder dumps: dumped after "
                       "destroy_process_group, with the recorder off (TORCH_FR_BUFFER_SIZE=0), or a gloo job "
                       "that only sent and received (gloo records no send/recv)")
    unchecked = [(f"rank(s) {', '.join(map(str, empty))}: the Flight Recorder dump holds no entries (dumped after "
                  "destroy_process_group, or with the recorder off): not checked")] if empty else []
    return Dumps(by_rank, unchecked)


# ------------------------------------------------------------------------------------------------
# groups
# ------------------------------------------------------------------------------------------------

def group_members(dumps: Dumps) -> tuple[dict[str, tuple], dict[str, str], bool, int]:
    """group name -> global ranks, group name -> description, whether the membership had to be
    reconstructed from the entries (torch 2.13's gloo writes every group's `pg_config` under one
    empty name, before the group has one), and the world size.

    Every report has a line per rank of the world, so the world is bounded by the ranks the dumps
    name (their file names, their group tables), not by the largest number one of them holds."""
    members: dict[str, set] = {}
    descs: dict[str, str] = {}
    broken = False
    named = set(dumps.by_rank)
    for _path, dump in dumps.by_rank.values():
        config = dump["pg_config"]  # checked: every rank below MAX_RANKS (fr_schema.py)
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
    for rank, (_path, dump) in dumps.by_rank.items():
        for e in dump["entries"]:
            name, desc = group_of(e)
            if name not in members or broken:
                members.setdefault(name, set()).add(rank)
                descs.setdefault(name, desc)
    if "0" in members:  # the default group holds every rank
        members["0"] |= set(range(world))
    return {n: tuple(sorted(r)) for n, r in members.items()}, descs, broken, world


# ------------------------------------------------------------------------------------------------
# logs
# ------------------------------------------------------------------------------------------------

def _write_logs(dumps: Dumps, run_dir: str) -> None:
    members, descs, broken, world = group_members(dumps)
    entries = [(rank, e) for rank, (_, d) in dumps.by_rank.items() for e in d["entries"]]
    times = [e["time_created_ns"] for _, e in entries]
    names: dict[str | None, set] = {}
    last_j: dict[str, int] = {}
    base = {group_of(e)[0]: 1 for _, e in entries}
    base.update({group_of(e)[0]: 0 for _, e in entries if not e["is_p2p"] and seq_of(e) == 0})
    for _, e in entries:
        names.setdefault(e["pg_id"], set()).add(group_of(e)[0])
        if not e["is_p2p"]:
            g = group_of(e)[0]
            last_j[g] = max(last_j.get(g, -1), seq_of(e) - base[g])
    facts = RunFacts(
        world=world, members=members, descs=descs,
        base=min((t for t in times if t > 0), default=0),
        notes=_gaps(dumps, broken), unchecked=dumps.unchecked + _alone(broken, members),
        joined=_joined_everywhere(dumps),
        pg_names={i: next(iter(n)) for i, n in names.items() if len(n) == 1 and i is not None}, last_j=last_j,
        seq_base=base)
    for rank, (path, dump) in sorted(dumps.by_rank.items()):
        RankWriter(rank, path, dump, facts).write(run_dir)


def _joined_everywhere(dumps: Dumps) -> set[tuple]:
    """(group, sequence number) of the gloo collectives that completed on some rank and complete
    only once every member joined: gloo marks nothing completed, and its counters are updated
    after the op returns, so a rank dumped right after one may not count it yet."""
    out = set()
    for _path, dump in dumps.by_rank.values():
        for e in dump["entries"]:
            if (backend_of(e) == "gloo" and not e["is_p2p"] and op_of(e)[0] in SYMMETRIC
                    and completed_by_counter(dump, e)):
                out.add((group_of(e)[0], seq_of(e)))
    return out


def _gaps(dumps: Dumps, broken: bool) -> list[str]:
    """The checks this input cannot support, said in the report instead of implied passed."""
    notes = [("read from PyTorch Flight Recorder dumps: they record no reduce op, no root of "
              "broadcast/reduce/gather/scatter, no tag, no all_to_all split sizes and no purpose (DDP "
              "buckets, join), so those were not compared")]
    backends = {backend_of(e) for _, d in dumps.by_rank.values() for e in d["entries"]}
    if "gloo" in backends:
        notes.append("gloo's Flight Recorder records no send/recv: point-to-point ops were not checked, and "
                     "it marks every op 'scheduled' and updates its counters late: completion is known only "
                     "where the counters or a peer show it")
    for rank, (_path, dump) in sorted(dumps.by_rank.items()):
        if dump["damaged"]:
            notes.append(f"rank {rank}'s Flight Recorder dump: {dump['damaged']} damaged entr"
                         f"{'y' if dump['damaged'] == 1 else 'ies'} left out ({dump['damage']})")
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
