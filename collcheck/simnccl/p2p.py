"""Point-to-point on the simulated backend: in order per (sender, receiver), each pair on its
own stream (NCCL's P2P communicators). A send is done once its data is out, as a small NCCL
message is once it sits in the connection's buffers, whether or not the receiver has posted its
recv yet (so two ranks that both send first do not wait for each other); a recv is done when
its message has arrived. A send nobody receives therefore completes; its recv-less peer is the
one that hangs, which the matcher finds by counting each pair's messages.
"""

from __future__ import annotations

from . import exchange as ex
from .streams import Batch


class PointToPoint:
    """send / recv of a SimNcclGroup (a mixin: the group's store, rank, streams)."""

    def _p2p_slot(self, src: int, dst: int) -> int:
        with self._lock:
            n = self._p2p_counts.get((src, dst), 0)
            self._p2p_counts[(src, dst)] = n + 1
            return n

    def send(self, tensors, dst: int, tag: int = 0):
        key = f"p/{self._rank}-{dst}/{self._p2p_slot(self._rank, dst)}"

        def run(work):
            self.store.set(key, ex.pack([ex.to_bytes(t) for t in tensors]))
        return self._enqueue(("p2p", min(self._rank, dst), max(self._rank, dst)), "send",
                             {"tensors": tensors, "peer": dst, "tag": tag}, tensors, run)

    def recv(self, tensors, src: int, tag: int = 0):
        key = f"p/{src}-{self._rank}/{self._p2p_slot(src, self._rank)}"

        def run(work):
            self._wait_keys([key], work)
            chunks = ex.unpack(bytes(self.store.get(key)))
            self.store.delete_key(key)
            for j, t in enumerate(tensors):
                ex.put(t, chunks[j] if j < len(chunks) else b"")
        return self._enqueue(("p2p", min(self._rank, src), max(self._rank, src)), "recv_",
                             {"tensors": tensors, "peer": src, "tag": tag}, tensors, run)

    def recv_anysource(self, tensors, tag: int = 0):
        raise RuntimeError("simnccl: recv from any source is not supported (NCCL has none)")

    # torch's _coalescing_manager (coalesced collectives): the Work of the block covers its ops
    def _start_coalescing(self, device=None):
        self._coalescing = []

    def _end_coalescing(self, device=None):
        works, self._coalescing = self._coalescing or [], None
        return Batch(works)
