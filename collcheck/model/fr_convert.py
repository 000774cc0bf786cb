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
from ..reader import LogError
from .fr_entries import (
    SYMMETRIC,
    backend_of,
    group_of,
    group_order,
    op_of,
    seq_of,
)
from .fr_load import load_dump, sniff
from .fr_rank_log import RankWriter, RunFacts, completed_by_counter

CONVERTER = 11  # bump when the conversion changes: cached conversions are redone
MAX_RANKS = 1 << 20  # a rank beyond this is damage, not a job
_RANK_IN_NAME = re.compile(r"(\d+)$")


@dataclass
class Dumps:
    """One run's dumps: rank -> (path, dump)."""

    by_rank: dict[int, tuple[str, dict]]
    unchecked: list[str] = field(default_factory=list)  # ranks whose dumps hold nothing


def find_dumps(target: str) -> list[str]:
    """The Flight Recorder dumps under `target` (a file or a directory), by content; [] when it
    holds collcheck logs or no dump."""
    if os.path.isfile(target):
        return [target] if sniff(target) else []
    if not os.path.isdir(target):
        return []
    paths = [os.path.join(root, name) for root, _dirs, files in os.walk(target) for name in sorted(files)]
    if any(p.endswith(lf.LOG_SUFFIX) for p in paths):
        return []  # collcheck logs: nothing opened (a big run has thousands of files)
    return sorted(p for p in paths if sniff(p))


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
    unchecked = [(f"rank(s) {', '.join(map(str, empty))}: the Flight Recorder dump holds no entries (dumped after "
                  "destroy_process_group, or with the recorder off): not checked")] if empty else []
    return Dumps(by_rank, unchecked)


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
    if not isinstance(ranks, list) or not all(isinstance(r, int) and 0 <= r < MAX_RANKS for r in ranks):
        return None
    return tuple(ranks)


def group_members(dumps: Dumps) -> tuple[dict[str, tuple], dict[str, str], bool]:
    """group name -> global ranks, group name -> description, and whether the membership had to
    be reconstructed from the entries (torch 2.13's gloo writes every group's `pg_config` under
    one empty name, before the group has one)."""
    members: dict[str, set] = {}
    descs: dict[str, str] = {}
    broken = False
    world = max(dumps.by_rank) + 1
    for _path, dump in dumps.by_rank.values():
        config = dump.get("pg_config") or {}
        if not isinstance(config, dict) or "" in config:
            broken = True
            # the ranks of *some* group of the run: no use for membership, but ranks that exist
            # (a rank that left no dump is then said to be missing)
            ranks = _parse_ranks(config[""].get("ranks")) if isinstance(config, dict) and isinstance(
                config.get(""), dict) else None
            world = max([world] + [r + 1 for r in ranks or ()])
            continue
        for name, info in config.items():
            ranks = _parse_ranks(info.get("ranks")) if isinstance(info, dict) else None
            if ranks is not None and ranks:
                members.setdefault(str(name), set()).update(ranks)
                descs.setdefault(str(name), str(info.get("desc", "")))
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
    facts = RunFacts(
        world=max([max(dumps.by_rank) + 1] + [max(r) + 1 for r in members.values() if r]),
        members=members, descs=descs,
        base=min((t for t in times if isinstance(t, int) and t > 0), default=0),
        notes=_gaps(dumps, broken), unchecked=dumps.unchecked + _alone(broken, members),
        joined=_joined_everywhere(dumps),
        pg_names={i: next(iter(n)) for i, n in names.items() if len(n) == 1}, last_j=last_j, seq_base=base)
    for rank, (path, dump) in sorted(dumps.by_rank.items()):
        RankWriter(rank, path, dump, facts).write(run_dir)


def _joined_everywhere(dumps: Dumps) -> set[tuple]:
    """(group, sequence number) of the gloo collectives that completed on some rank and complete
    only once every member joined: gloo marks nothing completed, and its counters are updated
    after the op returns, so a rank dumped right after one may not count it yet."""
    out = set()
    for _path, dump in dumps.by_rank.values():
        for e in dump.get("entries", []):
            if (backend_of(e) == "gloo" and not e.get("is_p2p") and op_of(e)[0] in SYMMETRIC
                    and completed_by_counter(dump, e)):
                out.add((group_of(e)[0], e.get("collective_seq_id")))
    return out


def _gaps(dumps: Dumps, broken: bool) -> list[str]:
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
    return notes


def _alone(broken: bool, members: dict[str, tuple]) -> list[str]:
    """Groups that nothing could be compared in: reconstructed from one rank's entries only."""
    alone = sorted((n for n, r in members.items() if len(r) == 1 and n != "0"), key=group_order) if broken else []
    if not alone:
        return []
    return [(f"group(s) {', '.join(alone)}: only one rank's entries use each, so nothing of them could be "
             "compared (their other members, if any, are not known)")]
