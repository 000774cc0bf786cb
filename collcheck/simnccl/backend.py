"""The simulated NCCL process group: NCCL's timing and pairing on CPU processes.

Under NCCL a collective is enqueued on a CUDA stream and the call returns at once; `wait()` only
makes the compute stream wait; the CPU blocks where it reads a result (`.item()`), at a
`barrier()` (which synchronizes the device) or never. Here each group has one "stream" (a worker
thread running its collectives in issue order) and each peer pair one more for P2P (NCCL runs P2P
on its own per-pair communicators); the CPU blocks only at sync points (`sync_point`), which wait
for every collective this process has issued so far. Data moves through the job's store
(exchange.py): nothing is checked, ops pair by position. A collective not done within the group's
timeout is the watchdog's: it prints NCCL's message and aborts the process (SIGABRT), as
TORCH_NCCL_ASYNC_ERROR_HANDLING's default does.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from ..capture import session
from . import exchange as ex
from . import streams
from .p2p import PointToPoint
from .streams import Aborted, SimWork, Stream, Timeout, sync_point

SHUTDOWN_GRACE_S = 1.0


class SimNcclGroup(PointToPoint, dist.ProcessGroup):
    """init_process_group("simnccl"): see the module's docstring and docs/simnccl.md."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta, name: str):
        super().__init__(rank, size)
        self._name = name
        self.store, self.timeout_s = store, timeout.total_seconds()
        self._rank, self._size = rank, size
        self._seq = 0  # every op, as NCCL's SeqNum
        self._collectives = 0
        self._p2p_counts: dict = {}
        self._streams: dict = {}
        self._aborted = False
        self._lock = threading.Lock()
        self._coalescing: list | None = None

    def getBackendName(self) -> str:
        return "simnccl"

    @property
    def group_name(self) -> str:
        """c10d keeps a group's name in its C++ backend, which a Python group has none of."""
        return self._name

    # -- plumbing -----------------------------------------------------------------------------
    def _stream(self, key) -> Stream:
        s = self._streams.get(key)
        if s is None:
            s = self._streams[key] = Stream(f"simnccl-{self.group_name}-{key}", self)
        return s

    def _enqueue(self, stream_key, opname: str, record: dict, outputs: list, run: Callable) -> SimWork:
        rec = session.recorder()
        eid = None
        if rec is not None and rec.active:
            try:
                eid = rec.on_backend_issue(opname, self, frame=sys._getframe(2), **record)
            except Exception as exc:  # noqa: BLE001 - never break the job for a record
                rec.fail(exc)
        with self._lock:
            seq = self._seq
            self._seq += 1
        work = SimWork(outputs, opname, seq, eid, record.get("tensors") or ())
        if self._aborted:
            work.finish(Aborted(f"simnccl: process group {self.group_name} was shut down"))
            return work
        work.t_returned = rec.now_us() if eid is not None else None
        self._stream(stream_key).jobs.put((work, run))
        if eid is not None:  # its completion: what the recorder's poller sees of is_completed()
            try:
                rec.on_backend_return(eid, work)
            except Exception as exc:  # noqa: BLE001 - never break the job for a record
                rec.fail(exc)
        if self._coalescing is not None:  # inside torch's _coalescing_manager: part of its Work
            self._coalescing.append(work)
        return work

    def _deadline(self, work: SimWork) -> float:
        return work.t_issue + self.timeout_s

    def _wait_keys(self, keys: list[str], work: SimWork) -> None:
        """Until every key is in the store: polled (a blocking store wait cannot be interrupted
        by shutdown and logs each of its timeouts), from 0.2 ms apart up to 20 ms."""
        deadline = self._deadline(work)
        pause = 0.0002
        while not self._present(keys):
            if self._aborted:
                raise Aborted(f"simnccl: process group {self.group_name} was shut down")
            if time.monotonic() >= deadline:
                raise Timeout(f"Watchdog caught collective operation timeout: WorkNCCL(SeqNum={work.seq}, "
                              f"OpType={work.op}, Timeout(ms)={int(self.timeout_s * 1000)}) ran for "
                              f"{int((time.monotonic() - work.t_issue) * 1000)} milliseconds before timing out")
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def _present(self, keys: list[str]) -> bool:
        """Whether the peers have put their data in the store. A store that went away (its host,
        rank 0, exited) reads as "not yet": NCCL's intra-node transports do not notice a peer
        that exited either, its collective waits for the watchdog."""
        try:
            return self.store.check(keys)
        except Exception:  # noqa: BLE001
            return False

    def _collective(self, opname: str, record: dict, outputs: list, chunks: Callable[[], list[bytes]],
                    apply: Callable[[list[list[bytes]]], None]) -> SimWork:
        """Slot k of the group (its k-th collective; P2P is counted per channel): publish this
        rank's chunks, wait for every rank's, apply."""
        with self._lock:
            k = self._collectives
            self._collectives += 1

        def run(work: SimWork) -> None:
            keys = [f"c/{k}/{r}" for r in range(self._size)]
            self.store.set(keys[self._rank], ex.pack(chunks()))
            self._wait_keys(keys, work)
            payloads = self.store.multi_get(keys)
            if self.store.add(f"c/{k}/read", 1) == self._size:
                for key in [*keys, f"c/{k}/read"]:
                    self.store.delete_key(key)
            apply([ex.unpack(bytes(p)) for p in payloads])
        return self._enqueue("coll", opname, record, outputs, run)

    def watchdog_abort(self, work: SimWork, exc: BaseException) -> None:
        """NCCL's watchdog: the collective failed, the process goes down before anything waiting
        in it runs on (SIMNCCL_ABORT=0: the waiters are released with the error instead)."""
        rec = session.recorder()
        if work.eid is not None and rec is not None:
            rec.finish(work.eid, work.t_returned or 0, exc)
            work.eid = None
        try:
            print(f"[rank {dist.get_rank()}] simnccl: {exc}. "
                  "To avoid data inconsistency, we are taking the entire process down.", file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001, S110 - stderr closed, the group gone: the abort goes on
            pass
        if os.environ.get("SIMNCCL_ABORT", "1") != "0":
            if rec is not None and rec.writer is not None:
                try:  # what is queued goes out first: nothing runs after the abort
                    with rec.writer.lock:
                        rec.drain_completions()
                        rec.writer.write()
                except Exception:  # noqa: BLE001, S110 - the abort goes on regardless
                    pass
            os.abort()
        work.finish(exc)

    def shutdown(self) -> None:
        """destroy_process_group(): collectives whose peers are there finish (a second at most:
        the stream may just not have run them yet), the others fail (NCCL: comms aborted)."""
        streams.settle(SHUTDOWN_GRACE_S)
        self._aborted = True
        for s in self._streams.values():
            s.jobs.put(None)
        for s in self._streams.values():  # a stream inside a store call at interpreter exit aborts it
            s.join(timeout=2.0)

    abort = shutdown

    # -- collectives (names and arguments as torch's ProcessGroup calls them) ----------------
    def allreduce(self, tensors, opts=None, opname="allreduce_"):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._collective(opname, {"tensors": tensors, "reduce_op": _op_int(op)}, tensors,
                                lambda: [ex.to_bytes(t) for t in tensors],
                                lambda by_rank: ex.reduce_into(tensors, op, by_rank, self._size))

    def allreduce_coalesced(self, tensors, opts=None):
        return self.allreduce(tensors, opts, opname="allreduce_coalesced_")

    def barrier(self, opts=None):
        """NCCL's barrier: a 1-element float all-reduce of zeros (ProcessGroupNCCL::barrier,
        `at::zeros`; torch 1.9 used `at::empty`, whatever the memory held: SIMNCCL_BARRIER_VALUE
        sets it), then a device synchronization."""
        scratch = torch.full((1,), float(os.environ.get("SIMNCCL_BARRIER_VALUE", "0") or 0))
        work = self._collective("barrier", {"tensors": None}, [scratch], lambda: [ex.to_bytes(scratch)],
                                lambda by_rank: ex.reduce_into([scratch], dist.ReduceOp.SUM, by_rank, self._size))
        sync_point("barrier()", sys._getframe(1))
        return work

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0

        def apply(by_rank):
            chunks = by_rank[root] if root < len(by_rank) else []
            for j, t in enumerate(tensors):
                ex.put(t, chunks[j] if j < len(chunks) else b"")
        return self._collective("broadcast_", {"tensors": tensors, "peer": root}, tensors,
                                lambda: [ex.to_bytes(t) for t in tensors], apply)

    def reduce(self, tensors, opts=None):
        root, op = opts.rootRank, opts.reduceOp

        def apply(by_rank):
            if self._rank == root:
                ex.reduce_into(tensors, op, by_rank, self._size)
        return self._collective("reduce_", {"tensors": tensors, "reduce_op": _op_int(op), "peer": root}, tensors,
                                lambda: [ex.to_bytes(t) for t in tensors], apply)

    def allgather(self, output_lists, inputs, opts=None):
        def apply(by_rank):
            for j, outs in enumerate(output_lists):
                for r, out in enumerate(outs):
                    chunks = by_rank[r] if r < len(by_rank) else []
                    ex.put(out, chunks[j] if j < len(chunks) else b"")
        return self._collective("allgather_", {"tensors": inputs}, output_lists,
                                lambda: [ex.to_bytes(t) for t in inputs], apply)

    allgather_coalesced = allgather

    def _allgather_base(self, output, input, opts=None):
        return self.all_gather_single_coalesced([output], [input], opts, opname="_allgather_base_")

    def all_gather_single(self, output, input, opts=None):
        return self._allgather_base(output, input, opts)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None, opname="allgather_into_tensor_coalesced_"):
        def apply(by_rank):
            for j, out in enumerate(outputs):
                ex.gather_into(out, [chunks[j] if j < len(chunks) else b"" for chunks in by_rank])
        return self._collective(opname, {"tensors": inputs}, outputs, lambda: [ex.to_bytes(t) for t in inputs], apply)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def reduce_scatter(self, outputs, input_lists, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM

        def chunks():  # chunk d: what goes to rank d, all outputs' pieces in a row
            return [b"".join(ex.to_bytes(ins[d]) for ins in input_lists) for d in range(self._size)]

        def apply(by_rank):
            ex.reduce_scatter_into(outputs, op, [c[self._rank] if self._rank < len(c) else b"" for c in by_rank],
                                   self._size)
        return self._collective("reduce_scatter_", {"tensors": outputs, "reduce_op": _op_int(op)}, outputs,
                                chunks, apply)

    def _reduce_scatter_base(self, output, input, opts=None):
        return self.reduce_scatter_single_coalesced([output], [input], opts, opname="_reduce_scatter_base_")

    def reduce_scatter_single(self, output, input, opts=None):
        return self._reduce_scatter_base(output, input, opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None, opname="reduce_scatter_tensor_coalesced_"):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM

        def chunks():
            pieces = [ex.split_bytes(ex.to_bytes(t), self._size) for t in inputs]
            return [b"".join(p[d] for p in pieces) for d in range(self._size)]

        def apply(by_rank):
            ex.reduce_scatter_into(outputs, op, [c[self._rank] if self._rank < len(c) else b"" for c in by_rank],
                                   self._size)
        return self._collective(opname, {"tensors": outputs, "reduce_op": _op_int(op)}, outputs, chunks, apply)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def alltoall_base(self, output, input, output_splits, input_splits, opts=None):
        def rows(t, splits):
            data = ex.to_bytes(t)
            if not splits:
                return ex.split_bytes(data, self._size)
            per_row = len(data) // max(t.shape[0], 1) if t.dim() else len(data)
            out, at = [], 0
            for n in splits:
                out.append(data[at:at + n * per_row])
                at += n * per_row
            return out

        def apply(by_rank):
            mine = [c[self._rank] if self._rank < len(c) else b"" for c in by_rank]
            layout = rows(output, output_splits)
            ex.put(output, b"".join(m[:len(slot)].ljust(len(slot), b"\0") for m, slot in zip(mine, layout, strict=False)))
        return self._collective("alltoall_base_", {"tensors": [input], "splits": [list(input_splits), list(output_splits)]},
                                [output], lambda: rows(input, input_splits), apply)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs, inputs, opts=None):
        def apply(by_rank):
            for r, out in enumerate(outputs):
                chunks = by_rank[r] if r < len(by_rank) else []
                ex.put(out, chunks[self._rank] if self._rank < len(chunks) else b"")
        return self._collective("alltoall_", {"tensors": inputs}, outputs, lambda: [ex.to_bytes(t) for t in inputs], apply)

    def gather(self, output_lists, inputs, opts=None):
        root = opts.rootRank

        def apply(by_rank):
            if self._rank == root:
                for r, out in enumerate(output_lists[0]):
                    chunks = by_rank[r] if r < len(by_rank) else []
                    ex.put(out, chunks[0] if chunks else b"")
        return self._collective("gather_", {"tensors": inputs, "peer": root}, output_lists,
                                lambda: [ex.to_bytes(t) for t in inputs], apply)

    def scatter(self, outputs, input_lists, opts=None):
        root = opts.rootRank

        def chunks():
            return [ex.to_bytes(t) for t in input_lists[0]] if self._rank == root and input_lists else []

        def apply(by_rank):
            mine = by_rank[root] if root < len(by_rank) else []
            ex.put(outputs[0], mine[self._rank] if self._rank < len(mine) else b"")
        return self._collective("scatter_", {"tensors": outputs, "peer": root}, outputs, chunks, apply)


def _op_int(op) -> int | None:
    """The RedOpType value of a ReduceOp (options hold the object, whose `op` is the value)."""
    try:
        return int(getattr(op, "op", op))
    except Exception:  # noqa: BLE001 - premul-sum: no plain value
        return None
