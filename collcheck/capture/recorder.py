"""The recorder: one per process, fed by the dispatcher kernels and the API wrappers.

Hot path per collective: classify the call site (cached per code object), look up
interned ids, build one small map, one write(2). Everything else (analysis,
pretty names) happens in the reader, never here.
"""

from __future__ import annotations

import os
import socket
from collections import deque
import sys
import threading
import time
import warnings

import torch

from .. import __version__, logformat as lf
from . import callsite
from .config import Config
from .wire import WIRE_OPS
from .writer import LogWriter, open_exclusive

_C = torch._C._distributed_c10d
_unbox_pg = _C.ProcessGroup.unbox
_unbox_work = _C.Work.unbox


class ApiCall:
    """What the outermost `dist.*` call on this thread knows that the wire op does not."""

    __slots__ = ("name", "call_id", "reduce_op", "multi", "async_op", "returned", "index")

    def __init__(self, name, call_id, reduce_op, multi, async_op):
        self.name = name
        self.call_id = call_id
        self.reduce_op = reduce_op
        self.multi = multi  # object collectives etc.: wire ops carry the call id
        self.async_op = async_op
        self.returned = {}  # eid -> return time of wire ops that complete with the call
        self.index = 0


class Recorder:
    def __init__(self, config: Config):
        self.config = config
        self.writer: LogWriter | None = None
        self.active = False  # a log is open and nothing has failed
        self.failed = False
        self.tls = threading.local()
        self.t0 = time.monotonic_ns()
        self._group_names: dict[str, int] = {}
        self._threads: dict[int, int] = {}
        self.inflight: dict[int, tuple[int, int, str]] = {}  # eid -> (t_ns, thread ident, op)
        self._eid = 0
        self._api_calls = 0
        self.bwd_epoch = 0
        self._bucket: dict[int, tuple] = {}  # gid -> (backward epoch, eid, bucket index)
        self._last_in_group: dict[int, int] = {}  # gid -> eid of its latest event
        self._done_q: deque = deque()  # (eid, returned, completed, future) from gloo threads
        self._dtype_names: dict = {}
        self.rank = None

    # -- lifecycle ------------------------------------------------------------------
    def open(self, rank: int, world_size: int, backend: str) -> None:
        """Create this rank's log; called when init_process_group has made the rank known."""
        if self.writer is not None:
            return
        cfg = self.config
        run_id = cfg.resolved_run_id()
        restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
        fd, path = open_exclusive(os.path.join(cfg.directory, run_id), f"rank-{rank:05d}.{restart}")
        self.writer = LogWriter(fd, path)
        self.rank = rank
        header = {
            "k": lf.HEADER,
            "magic": lf.MAGIC,
            "v": lf.FORMAT_VERSION,
            "collcheck": __version__,
            "torch": torch.__version__,
            "python": sys.version.split()[0],
            "backend": backend,
            "rank": rank,
            "world": world_size,
            "run": run_id,
            "launch": os.environ.get("COLLCHECK_RUN_ID", ""),
            "restart": restart,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "argv": list(sys.argv),
            "wall_ns": time.time_ns(),
            "mono_ns": self.t0,
            "stack": "full" if cfg.full_stack else "site",
            "hang_s": cfg.hang_seconds,
        }
        with self.writer.lock:
            self.writer.write(header)
        self.active = True

    def fail(self, exc: BaseException) -> None:
        """Internal error: stop recording for good, say so once, never break the job."""
        if self.failed:
            return
        self.failed = True
        self.active = False
        warnings.warn(f"collcheck: recording disabled after an internal error: {exc!r}", RuntimeWarning, stacklevel=3)
        try:
            if self.writer is not None:
                with self.writer.lock:
                    self.writer.write({"k": lf.DISABLED, "m": repr(exc)[:500]})
        except Exception:
            pass

    def after_fork_in_child(self) -> None:
        """A forked child (DataLoader worker) never writes to its parent's log."""
        self.writer = None
        self.active = False
        self.tls = threading.local()
        self.inflight = {}
        self._group_names = {}
        self._threads = {}

    def now_us(self) -> int:
        return (time.monotonic_ns() - self.t0) // 1000

    # -- ids (writer lock held) -----------------------------------------------------
    def _thread_id(self, w: LogWriter) -> int:
        ident = threading.get_ident()
        h = self._threads.get(ident)
        if h is None:
            h = self._threads[ident] = len(self._threads)
            w.queue({"k": lf.THREAD, "h": h, "n": threading.current_thread().name, "id": ident})
        return h

    def group_id(self, w: LogWriter, pg) -> int:
        # keyed by name, never holding the group: a reference kept here would stop
        # destroy_process_group() from joining gloo's threads before interpreter exit (abort)
        name = pg.group_name
        gid = self._group_names.get(name)
        if gid is None:
            gid = self._group_names[name] = len(self._group_names)
            rec = {"k": lf.GROUP, "op": "seen", "gid": gid, "g": name, "d": getattr(pg, "group_desc", "")}
            ranks = _group_ranks(pg)
            if ranks is not None:
                rec["r"] = ranks
            w.queue(rec)
        return gid

    def _site(self, w: LogWriter, frame):
        user, names, stack = callsite.walk(frame, self.config.full_stack)
        site = None if user is None else w.site_id(user.f_code.co_filename, user.f_lineno, user.f_code.co_name)
        full = None if stack is None else [w.site_id(*f) for f in stack]
        return site, names, full

    def _dtype(self, dtype) -> str:
        s = self._dtype_names.get(dtype)
        if s is None:
            s = self._dtype_names[dtype] = str(dtype).replace("torch.", "")
        return s

    # -- the hot path -----------------------------------------------------------------
    def on_issue(self, opname: str, args, frame) -> int:
        """Write the record of a wire op before it is issued; return its event id."""
        spec = WIRE_OPS[opname]
        w = self.writer
        api: ApiCall | None = getattr(self.tls, "api", None)
        pg = _unbox_pg(args[spec.pg])
        if spec.tensors is not None and spec.tensors < len(args):
            ts = args[spec.tensors]
            dt = self._dtype
            key = ((dt(ts.dtype), tuple(ts.shape)),) if isinstance(ts, torch.Tensor) else tuple(
                (dt(t.dtype), tuple(t.shape)) for t in ts
            )
        else:
            key = None
        reduce_op = None
        if spec.reduce_op is not None:
            if api is not None and api.reduce_op is not None:
                reduce_op = api.reduce_op
            else:  # C++ caller (DDP reducer): reading the ScriptObject costs ~15 us
                reduce_op = int(args[spec.reduce_op].op())
        with w.lock:
            site, names, full = self._site(w, frame)
            rec = {"k": lf.COLL, "o": w.string_id(opname), "g": self.group_id(w, pg), "ts": self.now_us()}
            if key is not None:
                rec["t"] = w.tspec_id(key)
            if site is not None:
                rec["s"] = site
            if full is not None:
                rec["st"] = full
            h = self._thread_id(w)
            if h:
                rec["h"] = h
            if reduce_op is not None:
                rec["r"] = reduce_op
            index = spec.root if spec.root is not None else spec.peer
            if index is not None and index < len(args):
                rec["p"] = args[index]
            if spec.tag is not None and spec.tag < len(args) and args[spec.tag]:
                rec["tag"] = args[spec.tag]
            if opname == "alltoall_base_":
                rec["sp"] = [list(args[4]), list(args[3])] if len(args) > 4 else []
            if api is not None:
                if api.async_op:
                    rec["a"] = 1
                if api.name != spec.api:
                    rec["x"] = w.string_id(api.name)
                if api.multi:
                    rec["q"] = api.call_id
                    rec["qi"] = api.index
                    api.index += 1
            else:
                rec["a"] = 1  # issued below the Python API (C++ reducer, functional): async
                rec["n"] = 1
            eid = self._eid
            self._eid = eid + 1
            self._label(w, rec, names, eid)
            if self._done_q:
                self.drain_completions()
            w.write(rec)
            self.inflight[eid] = (time.monotonic_ns(), threading.get_ident(), opname)
        return eid

    def _label(self, w: LogWriter, rec: dict, names, eid: int) -> None:
        role, label = callsite.purpose(names)
        gid = rec["g"]
        last = self._last_in_group.get(gid)
        self._last_in_group[gid] = eid
        if role is None:
            return
        if role == "gradient bucket":
            # bucket k = the k-th bucket all-reduce of one backward pass (or join shadow pass)
            epoch = self.bwd_epoch if label.startswith("DDP backward") else None
            prev = self._bucket.get(gid)
            go_on = prev is not None and prev[0] == epoch and (epoch is not None or prev[1] == last)
            index = prev[2] + 1 if go_on else 0
            self._bucket[gid] = (epoch, eid, index)
            label = f"{label} {index}"
        rec["u"] = w.string_id(role)
        rec["l"] = w.string_id(label)

    def on_return(self, eid: int, out, error: BaseException | None) -> None:
        """After the op returned: a blocking API call completes when its wrapper returns,
        anything else (async_op=True, C++ callers) when its Work's future completes."""
        t_ret = self.now_us()
        if error is not None:
            self.finish(eid, t_ret, error)
            return
        api: ApiCall | None = getattr(self.tls, "api", None)
        if api is not None and not api.async_op:
            api.returned[eid] = t_ret
            return
        work = out[-1] if isinstance(out, tuple) else out
        if work is None:
            self.finish(eid, t_ret)
            return
        try:
            fut = _unbox_work(work).get_future()
        except RuntimeError:
            # gloo P2P work has no future: completion stays unknown (docs/log-format.md)
            self.returned_only(eid, t_ret)
            return
        # The callback runs in a gloo thread: it only appends (atomic under the GIL, no lock,
        # no packing); the next record, or the watchdog within 0.2 s, writes it out.
        fut.add_done_callback(lambda f, eid=eid, r=t_ret: self._done_q.append((eid, r, self.now_us(), f)))

    def drain_completions(self) -> None:
        """Turn futures completed since the last call into D records (writer lock held)."""
        q = self._done_q
        w = self.writer
        while q:
            eid, t_ret, t_done, fut = q.popleft()
            self.inflight.pop(eid, None)
            rec = {"k": lf.DONE, "i": eid, "r": t_ret, "c": t_done}
            try:
                fut.value()
            except BaseException as exc:  # the collective itself failed
                rec["e"] = f"{type(exc).__name__}: {exc}"[:2000]
            w.queue(rec)

    def returned_only(self, eid: int, t_ret: int) -> None:
        w = self.writer
        with w.lock:
            self.inflight.pop(eid, None)
            w.queue({"k": lf.DONE, "i": eid, "r": t_ret})

    def finish(self, eid: int, t_ret: int, error: BaseException | None = None) -> None:
        w = self.writer
        if w is None:
            return
        rec = {"k": lf.DONE, "i": eid, "r": t_ret, "c": self.now_us()}
        with w.lock:
            self.inflight.pop(eid, None)
            if error is not None:
                rec["e"] = f"{type(error).__name__}: {error}"[:2000]
                w.write(rec)  # an error may be followed by a crash: write now
            else:
                w.queue(rec)

    # -- process-level records ---------------------------------------------------------
    def record(self, rec: dict) -> None:
        w = self.writer
        if w is None:
            return
        with w.lock:
            w.write(rec)

    def record_group(self, op: str, pg, ranks, desc, frame, extra=None) -> None:
        w = self.writer
        if w is None:
            return
        with w.lock:
            site, _, _ = self._site(w, frame)
            rec = {"k": lf.GROUP, "op": op, "ts": self.now_us()}
            if pg is not None and hasattr(pg, "group_name"):
                rec["gid"] = self.group_id(w, pg)
                rec["g"] = pg.group_name
            if ranks is not None:
                rec["r"] = list(ranks)
            if desc:
                rec["d"] = desc
            if site is not None:
                rec["s"] = site
            if extra:
                rec.update(extra)
            w.write(rec)

    def next_api_call(self) -> int:
        self._api_calls += 1
        return self._api_calls


def _group_ranks(pg):
    try:
        from torch.distributed import distributed_c10d as c10d

        ranks = c10d._world.pg_group_ranks.get(pg)
        if ranks is not None:
            return sorted(ranks, key=lambda g: ranks[g])
    except Exception:
        pass
    return None
