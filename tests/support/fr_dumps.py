"""Flight Recorder dumps built in memory, as torch 2.13 writes them (pickle dump, version 2.10)
and as torch's own analyzer tests build them (test_fr_analysis.py)."""

from __future__ import annotations

import json
import pickle

from hypothesis import strategies as st


def entry(record_id, pg, seq, op, sizes, dtype="Float", p2p_seq=0, is_p2p=False, state="completed",
          frames=None, backend="nccl"):
    """One Flight Recorder entry as torch 2.13 writes it (pickle dump, version 2.10)."""
    return {
        "record_id": record_id, "pg_id": int(pg) if pg.isdigit() else 9, "process_group": (pg, "undefined"),
        "collective_seq_id": seq, "p2p_seq_id": p2p_seq, "op_id": seq, "profiling_name": f"{backend}:{op}",
        "time_created_ns": 1_700_000_000_000_000_000 + record_id * 1000, "duration_ms": None,
        "input_sizes": [list(sizes)], "input_dtypes": [dtype], "output_sizes": [list(sizes)],
        "output_dtypes": [dtype], "state": state, "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None, "retired": True, "timeout_ms": 600000, "is_p2p": is_p2p,
        "thread_id": "1", "thread_name": "MainThread",
        "frames": frames if frames is not None else [
            {"name": "all_reduce", "filename": "/x/site-packages/torch/distributed/distributed_c10d.py", "line": 3000},
            {"name": "train", "filename": "/home/u/train.py", "line": 40 + record_id % 3},
            {"name": "<module>", "filename": "/home/u/train.py", "line": 99}],
    }


def dump(entries, groups, version="2.10"):
    return {"version": version, "pg_config": {name: {"name": name, "desc": "undefined", "ranks": json.dumps(r)}
                                              for name, r in groups.items()},
            "pg_status": {}, "comm_lib_version": "2.21.5", "entries": entries}


def write_dumps(d, dumps, fmt="pickle"):
    d.mkdir(parents=True, exist_ok=True)
    for rank, data in dumps.items():
        path = d / f"comm_lib_trace_rank_{rank}"
        if fmt == "json":
            path.write_text(json.dumps(data))
        else:
            path.write_bytes(pickle.dumps(data, protocol=2))
    return d


def fr_event(record_id, name, inputs, outputs, state="completed", seq=0, dtype="float32", out_dtype=None,
             pg=("0", "default")):
    """An entry as torch's test_fr_analysis.py builds them (string sequence ids, one dtype name)."""
    return {"record_id": record_id, "profiling_name": f"nccl:{name}", "state": state, "process_group": pg,
            "input_sizes": inputs, "output_sizes": outputs, "input_dtypes": dtype,
            "output_dtypes": dtype if out_dtype is None else out_dtype, "collective_seq_id": str(seq),
            "p2p_seq_id": "0", "time_created_ns": 0, "frames": [], "is_p2p": False}


def peer_dump(entries, rank):
    return {"version": "2.8", "entries": entries, "pg_config": {
        "0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"},
        "1": {"name": "1", "desc": "sub_pg", "ranks": f"[{rank}]"}}}


WORLD = {"0": list(range(12))}  # (more ranks than convert.SHARE_FROM: ranks of one kind share a log)


def every_kind(rank: int, skew: int = 0) -> list:
    """A rank's entries of every kind a signature tells apart: tensors in or out, coalesced,
    barrier, sizes that may differ (all-to-all), P2P both ways, one not completed."""
    peer = rank ^ 1
    rows = [("all_reduce", [4], 1, {}), ("all_reduce", [8], 2, {}), ("all_reduce", [2, 3], 2, {}),
            ("barrier", [1], 3, {}), ("all_to_all_single", [6 + rank], 4, {}), ("reduce_scatter", [5], 5, {}),
            (f"send {rank}->{peer}", [3], 5, {"is_p2p": True, "p2p_seq": 1}),
            (f"recv {rank}<-{peer}", [3], 5, {"is_p2p": True, "p2p_seq": 2}),
            ("all_reduce", [4], 6, {"state": "scheduled"})]
    out = []
    for i, (op, sizes, seq, extra) in enumerate(rows):
        e = entry(i, "0", seq, op, sizes, **extra)
        e["time_created_ns"] += skew
        out.append(e)
    return out


def dumps_of_every_shape() -> list:
    """Dumps of every shape a reader meets: usual, with texts to escape, without counters, with
    text numbers (torch's analyzer tests), with a damaged entry."""
    long = "x" * 200
    escaped = dump([entry(0, "0", 1, "all_reduce", [4]), entry(1, "0", 2, "broadcast", [2, 2], state="started")],
                   WORLD)
    escaped["entries"][0]["thread_name"] = "t\x1b[2J"
    escaped["entries"][1]["frames"] = [{"name": long, "filename": f"/home/{long}.py", "line": None}]
    no_counters = dump(every_kind(1), WORLD)
    for e in no_counters["entries"]:
        e["duration_ms"], e["retired"], e["pg_id"] = 1.5, None, "0"
    return [dump(every_kind(0), WORLD), escaped, no_counters,
            {"version": "2.8", "entries": [fr_event(0, "all_reduce", [[4]], [[4]], seq=1)]},  # not usual: text numbers
            dump([entry(0, "0", 1, "all_reduce", [4]), {"profiling_name": 3}], WORLD)]  # a damaged entry


# values of any type and range a damaged or foreign dump could give a field
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 2), st.sampled_from([2**63 - 1, 2**63, 2**64, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=70),
    st.sampled_from(["ok", "\u00e9", "\x00", "x" * 5000]), st.binary(max_size=4),
    st.lists(st.integers(-1, 3), max_size=3), st.tuples(st.text(max_size=3), st.text(max_size=3)),
    st.dictionaries(st.sampled_from(["line", "name", "filename"]), st.integers(0, 3), max_size=3),
    st.lists(st.lists(st.integers(0, 3), max_size=2), max_size=2),
    st.lists(st.dictionaries(st.sampled_from(["line", "name", "filename"]),
                             st.one_of(st.integers(-1, 3), st.text(max_size=3), st.none())), max_size=2))
# (entry of every_kind's dump, field, new value), one to three of them
FIELD_CHANGES = st.lists(st.tuples(st.integers(0, 8), st.sampled_from(sorted(entry(0, "0", 1, "all_reduce", [4]))),
                                   ODD_VALUES), min_size=1, max_size=3)
