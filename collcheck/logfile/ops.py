"""The op table: where each c10d dispatcher op keeps its process group, tensors, reduce op and
peer, and the sets of ops every reader and writer tells apart (point-to-point, rooted), derived
from it.

Positions follow the schemas of torch 2.13 (`torch.ops.c10d.<op>.default._schema`).
Every collective, whoever issues it (Python `dist.*`, DDP's C++ reducer, join hooks,
functional collectives, DTensor), reaches one of these ops (capture.md).
"""

from __future__ import annotations

from typing import NamedTuple


class OpSpec(NamedTuple):
    pg: int  # argument index of the ProcessGroup
    tensors: int | None  # index of the tensors every rank must agree on (Tensor or Tensor[])
    reduce_op: int | None = None
    root: int | None = None  # group-local root of rooted collectives
    peer: int | None = None  # group-local peer of send/recv
    tag: int | None = None
    api: str = ""  # the public API that usually issues it (a record names others)
    # a point-to-point op: the kind of its channel in a `j` counter's key (format.seq_key; on
    # disk: 1 send, 2 recv, 3 recv from any source); 0: a collective of the whole group
    p2p: int = 0


WIRE_OPS: dict[str, OpSpec] = {
    "allreduce_": OpSpec(1, 0, reduce_op=2, api="all_reduce"),
    "allreduce_coalesced_": OpSpec(1, 0, reduce_op=2, api="all_reduce_coalesced"),
    "broadcast_": OpSpec(1, 0, root=2, api="broadcast"),
    "reduce_": OpSpec(1, 0, reduce_op=2, root=3, api="reduce"),
    "allgather_": OpSpec(2, 1, api="all_gather"),
    "_allgather_base_": OpSpec(2, 1, api="all_gather_into_tensor"),
    "allgather_coalesced_": OpSpec(2, 1, api="all_gather_coalesced"),
    "allgather_into_tensor_coalesced_": OpSpec(2, 1, api="all_gather_into_tensor_coalesced"),
    "gather_": OpSpec(2, 1, root=3, api="gather"),
    "scatter_": OpSpec(2, 0, root=3, api="scatter"),
    "reduce_scatter_": OpSpec(2, 0, reduce_op=3, api="reduce_scatter"),
    "_reduce_scatter_base_": OpSpec(2, 0, reduce_op=3, api="reduce_scatter_tensor"),
    "reduce_scatter_tensor_coalesced_": OpSpec(2, 0, reduce_op=3, api="reduce_scatter_tensor_coalesced"),
    "alltoall_": OpSpec(2, 1, api="all_to_all"),
    "alltoall_base_": OpSpec(2, 1, api="all_to_all_single"),
    "barrier": OpSpec(1, None, api="barrier"),
    "monitored_barrier_": OpSpec(1, None, api="monitored_barrier"),
    "send": OpSpec(1, 0, peer=2, tag=3, api="send", p2p=1),
    "recv_": OpSpec(1, 0, peer=2, tag=3, api="recv", p2p=2),
    "recv_any_source_": OpSpec(1, 0, tag=2, api="recv", p2p=3),
}
# the point-to-point ops (send, recv): paired by channel, not slots of their group's sequence
P2P_OPS = frozenset(op for op, spec in WIRE_OPS.items() if spec.p2p)
# the collectives with a root (broadcast, reduce, gather, scatter)
ROOTED_OPS = frozenset(op for op, spec in WIRE_OPS.items() if spec.root is not None)


# The public torch.distributed functions (distributed_c10d.py) whose calls put ops on the wire: the
# outermost one on the stack names a record's API call (callsite.py), no Python wrapper needed.
PUBLIC_APIS = frozenset(
    "all_reduce all_reduce_coalesced broadcast reduce all_gather all_gather_into_tensor all_gather_object "
    "all_gather_coalesced gather gather_object scatter scatter_object_list reduce_scatter "
    "reduce_scatter_tensor all_to_all all_to_all_single broadcast_object_list barrier monitored_barrier "
    "send recv isend irecv batch_isend_irecv send_object_list recv_object_list "
    "all_gather_single reduce_scatter_single".split()  # the last two: torch 2.13, FSDP2 calls them
)
# sizes that may differ per rank by design (all_to_all's splits): only their dtypes must agree
SHAPE_FREE_OPS = frozenset(("alltoall_", "alltoall_base_"))
ALWAYS_ASYNC = frozenset(("isend", "irecv", "batch_isend_irecv"))  # P2P ops have no async_op argument
