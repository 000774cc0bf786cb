"""What one PyTorch Flight Recorder entry means in collcheck's terms: its op and public API, its
group, its tensors, its call site and the user's chain, its peer; and which entries form one
coalesced collective. Tables cite what torch 2.13 writes (profiling_name "<backend>:<op>[ meta]",
c10::ScalarType names). Entries are those schema.entry_of checked: every field there, of its type."""

from __future__ import annotations

from ...knowledge.frames import in_chain, owner
from ...logfile.ops import WIRE_OPS
from .schema import MAX_RANKS

# Flight Recorder op name (after "<backend>:") -> (collcheck wire op, public API, tensors that
# ranks must agree on: "in" or "out")
FR_OPS = {
    "all_reduce": ("allreduce_", "all_reduce", "in"),
    "allreduce_coalesced": ("allreduce_coalesced_", "all_reduce_coalesced", "in"),
    "barrier": ("barrier", "barrier", None),
    "all_reduce_barrier": ("barrier", "barrier", None),
    "broadcast": ("broadcast_", "broadcast", "in"),
    "_broadcast_oop": ("broadcast_", "broadcast", "in"),
    "reduce": ("reduce_", "reduce", "in"),
    "_reduce_oop": ("reduce_", "reduce", "in"),
    "all_gather": ("allgather_", "all_gather", "in"),
    "all_gather_single": ("_allgather_base_", "all_gather_single", "in"),
    "_all_gather_base": ("_allgather_base_", "all_gather_into_tensor", "in"),
    "all_gather_v": ("_allgather_base_", "all_gather_single", "in"),
    "all_gather_into_tensor_coalesced": ("allgather_into_tensor_coalesced_", "all_gather_into_tensor_coalesced", "in"),
    "ALLGATHER_coalesced": ("allgather_into_tensor_coalesced_", "all_gather_into_tensor_coalesced", "in"),
    "reduce_scatter": ("reduce_scatter_", "reduce_scatter", "out"),
    "reduce_scatter_single": ("_reduce_scatter_base_", "reduce_scatter_single", "out"),
    "_reduce_scatter_base": ("_reduce_scatter_base_", "reduce_scatter_tensor", "out"),
    "reduce_scatter_v": ("_reduce_scatter_base_", "reduce_scatter_single", "out"),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter_tensor_coalesced_", "reduce_scatter_tensor_coalesced", "out"),
    "REDUCE_SCATTER_coalesced": ("reduce_scatter_tensor_coalesced_", "reduce_scatter_tensor_coalesced", "out"),
    "gather": ("gather_", "gather", "in"),
    "scatter": ("scatter_", "scatter", "out"),
    "all_to_all": ("alltoall_", "all_to_all", "in"),
    "all_to_all_single": ("alltoall_base_", "all_to_all_single", "in"),
    "all_to_all_v_single": ("alltoall_base_", "all_to_all_single", "in"),
    "send": ("send", "send", "in"),
    "recv": ("recv_", "recv", "out"),
}
# the wire op of a coalesced block of these (several entries with one sequence number)
COALESCED = {"allreduce_": ("allreduce_coalesced_", "all_reduce_coalesced"),
             "_allgather_base_": ("allgather_into_tensor_coalesced_", "all_gather_into_tensor_coalesced"),
             "_reduce_scatter_base_": ("reduce_scatter_tensor_coalesced_", "reduce_scatter_tensor_coalesced")}
# c10::ScalarType names (FR's dtypes) -> torch dtype names (collcheck's)
DTYPES = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
    "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool", "ComplexFloat": "complex64",
    "ComplexDouble": "complex128", "ComplexHalf": "complex32", "Float8_e4m3fn": "float8_e4m3fn",
    "Float8_e5m2": "float8_e5m2", "UInt16": "uint16", "UInt32": "uint32", "UInt64": "uint64",
}
# Ops that complete on a rank only once every member has joined them
SYMMETRIC = frozenset(("all_reduce", "allreduce_coalesced", "barrier", "all_reduce_barrier", "all_gather",
                       "all_gather_single", "_all_gather_base", "all_gather_into_tensor_coalesced", "reduce_scatter",
                       "reduce_scatter_single", "_reduce_scatter_base", "reduce_scatter_tensor_coalesced",
                       "all_to_all", "all_to_all_single"))



def group_of(entry: dict) -> tuple[str, str]:
    """(name, description) of the entry's group (schema.entry_of filled it in from `pg_id`
    where the dump had no `process_group`)."""
    return entry["process_group"]


def split_name(name: str) -> tuple[str, str, str | None]:
    """(backend, FR op name, P2P meta such as "0->1") of a `profiling_name`."""
    backend, op = name.split(":", 1) if ":" in name else ("", name)
    parts = op.split(" ")
    return backend, parts[0], (parts[1] if len(parts) > 1 else None)


def backend_of(entry: dict) -> str:
    return split_name(entry["profiling_name"])[0]


def op_of(entry: dict) -> tuple[str, str | None]:
    """(FR op name, P2P meta such as "0->1")."""
    return split_name(entry["profiling_name"])[1:]


def tensors_of(entry: dict, which: str | None) -> tuple | None:
    """((dtype, shape), ...) of the entry's inputs (`which` "in") or outputs ("out")."""
    if which is None:
        return None
    side = "input" if which == "in" else "output"
    return tensors_from(entry[f"{side}_sizes"], entry[f"{side}_dtypes"])


def tensors_from(sizes: tuple, dtypes: tuple) -> tuple:
    """((dtype, shape), ...): each shape with its dtype name (the last one for the shapes past the
    names), as torch names it."""
    out = []
    for i, shape in enumerate(sizes):
        d = dtypes[i] if i < len(dtypes) else (dtypes[-1] if dtypes else "?")
        out.append((DTYPES.get(d, d.lower()), shape))
    return tuple(out)


def site_of(frames) -> tuple[tuple | None, list]:
    """The innermost frame of the program and its call chain (outermost first) of FR's frames
    ((filename, line, name), innermost first): as the recorder keeps them, the frames the
    program's chain holds (knowledge/frames.py: not torch, collcheck or the Python library)."""
    chain = [f for f in frames if in_chain(owner(f[0]))]
    return (chain[0] if chain else None), chain[::-1]


def usual_api(wire: str) -> str:
    spec = WIRE_OPS.get(wire)
    return spec.api if spec is not None else wire


def peer_of(name: str, meta: str | None) -> int | None:
    """The group-local peer of "send 0->1" (1) or "recv 1<-0" (0)."""
    if not meta:
        return None
    text = meta.split("->")[1] if name == "send" and "->" in meta else (
        meta.split("<-")[1] if name == "recv" and "<-" in meta else "")
    if not (text.isascii() and text.isdigit() and len(text) < 8) or int(text) >= MAX_RANKS:
        return None  # not a group rank
    return int(text)


def blocks_of(entries: list[dict]) -> list[list[dict]]:
    """Entries in record order, the ops of one coalesced collective (same group and sequence
    number, not P2P) joined into one block; coalescing markers left out."""
    rows = [(op_of(e)[0], e["is_p2p"], group_of(e), e["collective_seq_id"]) for e in entries]
    return [[entries[i] for i in block] for block in block_bounds(rows)]


def block_bounds(rows: list[tuple]) -> list[list[int]]:
    """blocks_of on rows (FR op name, P2P, (group, description), collective_seq_id) in record
    order: the indices of each block's rows."""
    blocks: list[list[int]] = []
    for i, (name, p2p, group, seq) in enumerate(rows):
        if name == "coalesced":
            continue
        if blocks and not p2p:
            head = rows[blocks[-1][0]]
            if not head[1] and head[2] == group and head[3] == seq:
                blocks[-1].append(i)
                continue
        blocks.append([i])
    return blocks


def seq_of(entry: dict) -> int:
    """The entry's `collective_seq_id` (a number: torch writes an int, its tests a string)."""
    return entry["collective_seq_id"]


def group_order(name: str):
    """Groups in creation order: numeric names ("0", "1", ...) first, by number."""
    return (0, int(name)) if name.isascii() and name.isdigit() and len(name) < 20 else (1, name)
