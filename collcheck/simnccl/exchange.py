"""What each rank puts on the wire and makes of its peers' bytes, for every collective.

NCCL checks nothing: ranks are paired by their collectives' positions in the group, and each rank
runs its own kernel (its own op, dtype, sizes, root) over whatever bytes its peers' kernels move.
So each rank here publishes the raw bytes of its buffers (one chunk per destination where the op
scatters), and computes its own result from its peers' chunks read as its own dtype and size: a
barrier (a 1-element float all-reduce under NCCL) meets an all-reduce silently, an int64 meets a
float32 as reinterpreted bytes, a shorter peer buffer leaves the rest of the sum to zeros.
"""

from __future__ import annotations

import struct

import torch
import torch.distributed as dist


def to_bytes(t: torch.Tensor) -> bytes:
    if t.numel() == 0:
        return b""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def as_tensor(chunk: bytes, like: torch.Tensor) -> torch.Tensor:
    """`chunk` read as a tensor of `like`'s dtype and shape: the bytes that fit, zeros after."""
    n = like.numel() * like.element_size()
    if n == 0:
        return torch.empty_like(like)
    buf = bytearray(n)
    m = min(n, len(chunk))
    buf[:m] = chunk[:m]
    return torch.frombuffer(buf, dtype=like.dtype).reshape(like.shape)


def put(out: torch.Tensor, chunk: bytes) -> None:
    """Write the bytes of `chunk` that fit into `out`; the rest of `out` keeps what it had."""
    n = out.numel() * out.element_size()
    m = min(n, len(chunk))
    if m == 0:
        return
    with torch.no_grad():
        if m < n:
            merged = bytearray(to_bytes(out))
            merged[:m] = chunk[:m]
            chunk = bytes(merged)
        out.detach().copy_(as_tensor(chunk, out))


def split_bytes(data: bytes, parts: int) -> list[bytes]:
    step = len(data) // parts if parts else 0
    return [data[i * step:(i + 1) * step] for i in range(parts)]


def pack(chunks: list[bytes]) -> bytes:
    """Chunks with their lengths in front (no pickle: the store holds plain bytes)."""
    head = struct.pack(f"<I{len(chunks)}Q", len(chunks), *(len(c) for c in chunks))
    return head + b"".join(chunks)


def unpack(payload: bytes) -> list[bytes]:
    if len(payload) < 4:
        return []
    (count,) = struct.unpack_from("<I", payload)
    sizes = struct.unpack_from(f"<{count}Q", payload, 4)
    at, out = 4 + 8 * count, []
    for size in sizes:
        out.append(payload[at:at + size])
        at += size
    return out


def reduce(op, parts: list[torch.Tensor], size: int) -> torch.Tensor:
    """`op` (a ReduceOp) over each rank's contribution, in the receiving rank's dtype."""
    stacked = torch.stack(parts)
    if op == dist.ReduceOp.SUM:
        return stacked.sum(0, dtype=stacked.dtype)
    if op == dist.ReduceOp.AVG:
        total = stacked.sum(0, dtype=stacked.dtype)
        return total / size if total.is_floating_point() else total // size
    if op == dist.ReduceOp.PRODUCT:
        return stacked.prod(0, dtype=stacked.dtype)
    if op == dist.ReduceOp.MIN:
        return stacked.amin(0)
    if op == dist.ReduceOp.MAX:
        return stacked.amax(0)
    if op in (dist.ReduceOp.BAND, dist.ReduceOp.BOR, dist.ReduceOp.BXOR):
        fn = {dist.ReduceOp.BAND: torch.bitwise_and, dist.ReduceOp.BOR: torch.bitwise_or,
              dist.ReduceOp.BXOR: torch.bitwise_xor}[op]
        out = parts[0]
        for p in parts[1:]:
            out = fn(out, p)
        return out
    raise RuntimeError(f"simnccl: reduce op {op} is not supported")


def reduce_into(outs: list[torch.Tensor], op, chunks_by_rank: list[list[bytes]], size: int) -> None:
    """outs[j] = op over ranks of their j-th chunk, each read as outs[j]."""
    for j, out in enumerate(outs):
        parts = [as_tensor(chunks[j] if j < len(chunks) else b"", out) for chunks in chunks_by_rank]
        with torch.no_grad():
            out.detach().copy_(reduce(op, parts, size))


def reduce_scatter_into(outputs: list[torch.Tensor], op, mine: list[bytes], size: int) -> None:
    """This rank's share of a reduce-scatter: `mine[r]` is what rank r sent it (every output's
    piece in a row), reduced as the outputs laid end to end."""
    flat = torch.cat([o.detach().reshape(-1) for o in outputs]) if len(outputs) > 1 else outputs[0]
    reduce_into([flat], op, [[m] for m in mine], size)
    at = 0
    for o in outputs if len(outputs) > 1 else ():
        put(o, to_bytes(flat[at:at + o.numel()]))
        at += o.numel()


def gather_into(out: torch.Tensor, pieces: list[bytes]) -> None:
    """A flat output made of each rank's piece in rank order, each piece the output's share."""
    share = (out.numel() * out.element_size()) // max(len(pieces), 1)
    put(out, b"".join(p[:share].ljust(share, b"\0") for p in pieces))
