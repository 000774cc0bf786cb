"""A run as PyTorch Flight Recorder dumps (pickle, version 2.10, one file `rank_<rank>` per rank),
the input of torch's own analyzer (`torchfrtrace DIR -p rank_`): a cross-check users can run.

What collcheck records and FR has no field for (reduce op, root, tag, labels) is left out, as
FR leaves it out; input and output sizes are derived from the recorded tensors as the op
defines them (an all-gather's output is the group size times its input). Each file is created
fresh, never through a link nor over an input (base/outputs.py).
"""

from __future__ import annotations

import os
import pickle

from ..base.outputs import NO_INPUTS, Inputs, atomic_output, check_output, output_folder
from ..logfile.ops import WIRE_OPS
from ..model import P2P_OPS

FR_VERSION = "2.10"
# collcheck wire op -> Flight Recorder op name (a point-to-point op's is its API's: send, recv)
FR_NAMES = {op: WIRE_OPS[op].api for op in P2P_OPS} | {
    "allreduce_": "all_reduce", "allreduce_coalesced_": "allreduce_coalesced", "barrier": "barrier",
    "monitored_barrier_": "barrier", "broadcast_": "broadcast", "reduce_": "reduce", "allgather_": "all_gather",
    "_allgather_base_": "_all_gather_base", "allgather_coalesced_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather_into_tensor_coalesced", "reduce_scatter_": "reduce_scatter",
    "_reduce_scatter_base_": "_reduce_scatter_base",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter_tensor_coalesced", "gather_": "gather", "scatter_": "scatter",
    "alltoall_": "all_to_all", "alltoall_base_": "all_to_all_single",
}
DTYPE_NAMES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
    "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool", "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}
_GATHERS = frozenset(("allgather_", "_allgather_base_", "allgather_into_tensor_coalesced_", "allgather_coalesced_"))
_SCATTERS = frozenset(("reduce_scatter_", "_reduce_scatter_base_", "reduce_scatter_tensor_coalesced_"))


def dumps(run) -> dict[int, dict]:
    """rank -> its dump, as torch's `_dump_fr_trace()` writes it."""
    config = {}
    for log in run.ranks.values():
        for g in log.groups:
            members = run.group_members(g.name)
            config[g.name] = {"name": g.name, "desc": g.desc or "undefined", "ranks": str(list(members))}
    return {rank: _dump(run, rank, log, config) for rank, log in sorted(run.ranks.items())}


def _dump(run, rank: int, log, config: dict) -> dict:
    entries, pg_ids, coll_seq, p2p_seq, completed = [], {}, {}, {}, {}
    for i, e in enumerate(log.events()):
        pg_id = pg_ids.setdefault(e.group, len(pg_ids))
        members = run.group_members(e.group)
        n = max(len(members), 1)
        p2p = e.sig.op in P2P_OPS
        if p2p:
            p2p_seq[e.group] = p2p_seq.get(e.group, 0) + 1
        else:
            coll_seq[e.group] = coll_seq.get(e.group, 0) + 1
            if e.completed and completed.get(e.group, 0) == coll_seq[e.group] - 1:
                completed[e.group] = coll_seq[e.group]  # the counters count completed ones in order
        name = FR_NAMES.get(e.sig.op, e.sig.op)
        if p2p:
            me = members.index(rank) if rank in members else rank
            peer = e.sig.root if e.sig.root is not None else -1
            name += f" {me}->{peer}" if e.sig.op == "send" else f" {me}<-{peer}"
        shapes = [list(s) for _, s in e.sized.tensors] or ([[1]] if e.sig.op == "barrier" else [])
        dtypes = [DTYPE_NAMES.get(d, d) for d, _ in e.sized.tensors] or (["Float"] if shapes else [])
        inputs, outputs = shapes, shapes
        if e.sig.op in _GATHERS:
            outputs = [[n * _numel(s)] for s in shapes]
        elif e.sig.op in _SCATTERS:
            inputs = [[n * _numel(s)] for s in shapes]
        entries.append({
            "record_id": i, "pg_id": pg_id, "process_group": (e.group, config.get(e.group, {}).get("desc", "undefined")),
            "collective_seq_id": coll_seq.get(e.group, 0), "p2p_seq_id": p2p_seq.get(e.group, 0), "op_id": i + 1,
            "profiling_name": f"{_backend(log)}:{name}", "time_created_ns": e.t_issue * 1000,
            "duration_ms": None, "input_sizes": inputs, "input_dtypes": dtypes, "output_sizes": outputs,
            "output_dtypes": dtypes, "state": "completed" if e.completed else "scheduled", "retired": e.completed,
            "time_discovered_started_ns": None,
            "time_discovered_completed_ns": e.t_done * 1000 if e.t_done is not None else None,
            "timeout_ms": 600000, "is_p2p": p2p, "thread_id": "0", "thread_name": e.thread,
            "frames": _frames(e),
        })
    status = {str(pg): {"last_enqueued_collective": coll_seq.get(g, 0), "last_started_collective": -1,
                        "last_completed_collective": completed.get(g, 0)} for g, pg in pg_ids.items()}
    return {"version": FR_VERSION, "pg_config": config, "pg_status": status, "comm_lib_version": "collcheck",
            "entries": entries}


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _backend(log) -> str:
    backend = str(log.header.get("backend", ""))
    for name in ("nccl", "gloo"):
        if name in backend:
            return name
    return "gloo"


def _frames(e) -> list[dict]:
    """Innermost first, as FR stores them."""
    chain = [x for x in (e.stack or e.chain or (e.site,)) if x]
    return [{"name": f[2], "filename": f[0], "line": f[1]} for f in reversed(chain) if f is not None]


def export(run, target: str, inputs: Inputs = NO_INPUTS) -> str:
    """`collcheck export --format fr`: the folder `target` of dumps; what to tell the user."""
    paths = write(run, target, inputs)
    return f"wrote {len(paths)} Flight Recorder dumps to {target} (torchfrtrace {target} -p rank_)"


def write(run, directory: str, inputs: Inputs = NO_INPUTS) -> list[str]:
    """`rank_<rank>` files in `directory` (made when missing); their paths. Every name is checked
    before the first is written (UsageError: the folder or a file in it is a link or an input)."""
    output_folder(directory, inputs)
    found = dumps(run)
    paths = {rank: os.path.join(directory, f"rank_{rank}") for rank in found}
    for path in paths.values():
        check_output(path, inputs)
    for rank, dump in found.items():
        with atomic_output(paths[rank], "wb", inputs=inputs) as f:
            pickle.dump(dump, f, protocol=2)
    return list(paths.values())
