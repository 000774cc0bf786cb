"""The recorder: one per process, fed by the dispatcher kernels and the API wrappers.

Hot path per collective: classify the call site (cached per code object), look up
interned ids, build one small map, one write(2). Everything else (analysis,
pretty names) happens in the reader, never here. The fields that repeat for one call
site, op, group, tensor spec and thread form a Template: the Python kernels build one per
call; the compiled fast path (native/) caches them, writes a template's first record
through `emit` and the later ones itself, byte for byte what `emit` would write.

The recorder holds three collaborators, each with its own state: `completions` (D records and
the in-flight table), `live` (live mode's tables) and `native` (what the compiled kernels call
back). On the compiled path the state the kernels share (event ids, counters, in-flight table,
live hashes) lives in C++: `use_native` tells each of them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Callable

import torch

from ..base.settings import Settings
from ..logfile import format as lf
from ..logfile.checkpoint import checkpoint_record, roll, sizes_hash
from ..logfile.ops import ALWAYS_ASYNC, WIRE_OPS
from ..logfile.records import header_record, stop_record
from ..logfile.writer import LogWriter, open_exclusive
from . import callsite
from .completions import Completions
from .live import tables as live_hash
from .native import fastpath
from .native.hooks import NativeHooks

_C = torch._C._distributed_c10d
ENQUEUE_FUTURES = frozenset({"nccl", "xccl", "simnccl"})  # backends whose Work futures complete at enqueue
_unbox_pg = _C.ProcessGroup.unbox


class ApiCall:
    """What the outermost `dist.*` call on this thread knows that the wire op does not."""

    __slots__ = ("async_op", "call_id", "index", "multi", "name", "reduce_op", "returned")

    def __init__(self, name, call_id, reduce_op, multi, async_op):
        self.name = name
        self.call_id = call_id
        self.reduce_op = reduce_op
        self.multi = multi  # object collectives etc.: wire ops carry the call id
        self.async_op = async_op
        self.returned = {}  # eid -> return time of wire ops that complete with the call
        self.index = 0


class ThreadState(threading.local):
    """Per thread: the ApiCall of the outermost `dist.*` call running on it (Recorder.set_api_call)."""

    api: ApiCall | None = None
    fast = None  # the compiled module: it keeps "an API call is active" per thread (no Python read)
    issued: tuple | None = None  # (op, group name) of the op this thread issued last (Python kernels)


class Template:
    """Interned fields of a C record that only depend on its op, group, tensors, call site and thread."""

    # context: what the API call adds when no Python wrapper runs (the usual case): async (`a`), the
    # public function when it is not the op's usual one (`x`), or issued below the Python API (`n`)
    # sig: live_hash.signature of the op (its group's rolling hash: checkpoints, live mode)
    # balance: live_hash.a2a_balance of an all_to_all_single's split sizes (None: none)
    # signed: (op, tensors, reduce op, peer, tag): the signature's fields (an API call may change two)
    __slots__ = ("api", "balance", "context", "fields", "g", "label", "o", "op", "role", "seq", "sig", "signed")


class _Switch:
    """Recorder.active: setting it starts or pauses recording (the compiled kernels, the Python
    kernels: watch_active); reading it is an instance attribute read, which the kernels and
    wrappers do per call (a descriptor with __set__ alone: reads find the instance's value)."""

    def __set__(self, rec: Recorder, value: bool) -> None:
        rec.__dict__["active"] = value
        if rec._native is not None:  # the C++ kernels skip the GIL entirely while paused
            rec._native.set_enabled(bool(value))
        if rec._active_watcher is not None:
            try:
                rec._active_watcher(bool(value))
            except Exception as exc:  # noqa: BLE001 - never break the job: stop recording instead
                rec.fail(exc)  # (its warning names the line that set `active`)


class Recorder:
    active = _Switch()  # a log is open and nothing has failed

    def __init__(self, config: Settings):
        self.config = config
        self.writer: LogWriter | None = None
        self._native = None  # the compiled kernels' module while they report to this recorder (use_native)
        self.compiled = False  # whether they do (read it; use_native sets it)
        self._active_watcher: Callable[[bool], None] | None = None  # watch_active
        self.active = False
        self.failed = False
        self.tls = ThreadState()  # read it; set_api_call writes its ApiCall
        self.t0 = time.monotonic_ns()
        self.completions = Completions(self.now_us)
        self.live = live_hash.LiveTables()
        self.native = NativeHooks(self, self.completions)
        self._group_names: dict[str, int] = {}
        self._threads: dict[int, int] = {}
        self._eid = 0
        self._api_calls = 0
        self._bwd_epoch = 0
        self._bucket: dict[int, tuple] = {}  # gid -> (backward epoch, eid, bucket index)
        self._last_in_group: dict[int, int] = {}  # gid -> eid of its latest event
        self._seqs: dict[int, int] = {}  # format.seq_key -> its last `j`
        self._dtype_names: dict = {}
        self._py_templates: dict[tuple, Template] = {}  # Python kernels: what fixes a template -> it
        self._api_sigs: dict[tuple, int] = {}  # (template, reduce op, API) -> signature (_api_signature)
        self._in_call: tuple | None = None  # (API, t_ns) of a group creation it waits in (waiting_in)
        self._optimizers: dict[int, int] = {}  # id(optimizer) -> its index in O records, by first step
        self._checkpointed = -1  # collectives issued at the last checkpoint (P record)
        self._sizes = 0  # rolling hash of the all_to_all_single sizes issued (checkpoint.sizes_hash)
        self.rank = None
        self._on_polled_group: Callable[[], None] | None = None  # on_polled_group

    def watch_active(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(on)` whenever recording starts or stops (dispatcher.py: the Python
        kernels come and go)."""
        self._active_watcher = callback

    def on_polled_group(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when a group whose completions are polled appears (session.py: the poller
        starts then, and only on such jobs)."""
        self._on_polled_group = callback

    def use_native(self, module) -> None:
        """Record through the compiled kernels' module (fastpath.attach), or, None, no longer: a
        later recorder took them. Its collaborators keep their shared state there."""
        self._native = module
        self.compiled = module is not None
        self.completions.use_native(module)
        self.live.use_native(module)
        self.native.use_native(module)
        if module is None:
            return
        hooks = self.native
        module.attach(hooks.issue, hooks.returned, hooks.label_sid, self.fail, self.t0, self.writer)
        self.writer.colls_written = module.peek_eid  # C records it wrote count too
        ThreadState.fast = module  # "an API call is active" is kept in C++
        self._set_polling()
        module.set_epoch(self._bwd_epoch)
        module.set_enabled(bool(self.active))

    def set_api_call(self, call: ApiCall | None) -> None:
        """The outermost `dist.*` call now running on this thread, None once it returned (torch_api.py)."""
        self.tls.api = call
        if ThreadState.fast is not None:
            ThreadState.fast.set_api(call is not None)

    def count_backward_pass(self) -> None:
        """A backward pass starts (dispatcher._patch_backward): DDP bucket k is per pass."""
        self._bwd_epoch += 1
        if self._native is not None:
            self._native.set_epoch(self._bwd_epoch)

    @property
    def in_call(self) -> tuple | None:
        """(API, t_ns) of the group creation this process waits in, or None (live/publisher.py)."""
        return self._in_call

    @contextlib.contextmanager
    def waiting_in(self, api: str, start_ns: int):
        """While a group creation that waits for every rank runs (torch_api.py)."""
        self._in_call = (api, start_ns)
        try:
            yield
        finally:
            self._in_call = None

    # -- lifecycle ------------------------------------------------------------------
    def open(self, rank: int, world_size: int, backend: str) -> None:
        """Create this rank's log; called when init_process_group has made the rank known."""
        if self.writer is not None:
            return
        cfg = self.config
        run_id = cfg.resolved_run_id()
        restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)
        fd, path = open_exclusive(os.path.join(cfg.directory, run_id), f"rank-{rank:05d}.{restart}")
        self.writer = LogWriter(fd, path, fastpath.writer_lock(), max_bytes=int(cfg.max_mb * 1024 * 1024))
        self.writer.snapshot_records = self._counters
        self.writer.on_stop = self._write_failed
        self.writer.clock = self.now_us
        self.rank = rank
        header = header_record(
            rank, world_size, run_id, torch=torch.__version__, python=sys.version.split()[0], backend=backend,
            launch=cfg.launch, restart=restart, host=socket.gethostname(),
            cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
            threads=torch.get_num_threads(), pid=os.getpid(), argv=list(sys.argv),
            wall_ns=time.time_ns() - (time.monotonic_ns() - self.t0),  # both clocks at the origin of `ts`
            mono_ns=self.t0, stack="full" if cfg.full_stack else "site", hang_s=cfg.hang_seconds,
            **({"poll_ms": cfg.poll_ms} if self._will_poll(backend) else {}))
        with self.writer.lock:
            self.writer.write(header)
        self.active = True

    def fail(self, exc: BaseException) -> None:
        """Internal error: stop recording for good, say so once, never break the job. A record
        the compiled path could not write is the disk's doing: the writer says so (stop)."""
        if self.failed:
            return
        w = self.writer
        code = getattr(w.counters, "error", 0) if w is not None else 0
        if code:  # (WriterLock.error: the errno of the compiled path's failed write)
            with w.lock:
                w.stop(OSError(code, os.strerror(code)))
            self._write_failed(w.stopped or os.strerror(code))
            return
        self._stop_recording(f"recording disabled after an internal error: {exc!r}")
        try:
            if w is not None:
                with w.lock:
                    w.write(stop_record(repr(exc), ts=self.now_us()))
        except Exception:
            pass

    def _write_failed(self, why: str) -> None:
        """The writer could not write the log (LogWriter.stop wrote why, writer lock held): the job
        goes on unrecorded."""
        self._stop_recording(f"recording stopped: could not write {self.writer.path}: {why}; the job goes on "
                             "unrecorded, and its log says where recording stopped")

    def _stop_recording(self, warning: str) -> None:
        if self.failed:
            return
        self.failed = True
        self._active_watcher = None  # maybe called from inside a Python kernel: that stays registered, idle
        self.active = False
        warnings.warn(f"collcheck: {warning}", RuntimeWarning, stacklevel=4)

    def after_fork_in_child(self) -> None:
        """A forked child (DataLoader worker) never writes to its parent's log."""
        if self._native is not None:
            self._native.after_fork_in_child()
        self._active_watcher = None  # the dispatcher's lock may have been held at fork(): registered for good
        self.writer = None
        self.active = False
        self.tls = ThreadState()
        self.completions.after_fork_in_child()
        self._group_names = {}
        self._threads = {}
        self.native.after_fork_in_child()
        self._py_templates = {}
        self._api_sigs = {}
        self._seqs = {}
        self._checkpointed = -1
        self._sizes = 0
        self.live.reset()

    def now_us(self) -> int:
        return (time.monotonic_ns() - self.t0) // 1000

    # -- ids (writer lock held) -----------------------------------------------------
    def _thread_id(self, w: LogWriter) -> int:
        ident = threading.get_ident()
        h = self._threads.get(ident)
        if h is None:
            h = self._threads[ident] = len(self._threads)
            w.keep({"k": lf.THREAD, "h": h, "n": threading.current_thread().name, "id": ident})
        return h

    def group_id(self, w: LogWriter, pg, name: str | None = None) -> int:
        # keyed by name, never holding the group: a reference kept here would stop
        # destroy_process_group() from joining gloo's threads before interpreter exit (abort)
        if name is None:
            name = pg.group_name
        gid = self._group_names.get(name)
        if gid is None:
            if pg is None:  # the fast path passes the group with the first record of a template only
                pg = _C._resolve_process_group(name)
            gid = self._group_names[name] = len(self._group_names)
            rec = {"k": lf.GROUP, "op": "seen", "gid": gid, "g": name, "d": getattr(pg, "group_desc", "")}
            ranks = _group_ranks(pg)
            if ranks is not None:
                rec["r"] = ranks
                self.live.set_members(gid, ranks)
            enqueue = self._enqueue_futures(pg)
            if enqueue or self.config.completion == "poll":
                rec["cp"] = 1
                self.completions.polled_groups[name] = enqueue
                self._set_polling()
                if self._on_polled_group is not None:
                    self._on_polled_group()
            w.keep(rec)
        return gid

    def _will_poll(self, backend: str) -> bool:
        """Whether the job's default backend (get_backend_config(): "nccl", "cpu:gloo,cuda:nccl") has
        its completions polled: the header then says how often (reports give the times' resolution)."""
        return self.config.completion == "poll" or any(
            part.rpartition(":")[2].strip().lower() in ENQUEUE_FUTURES for part in str(backend).split(","))

    def _set_polling(self) -> None:
        """Tell the compiled kernels which Works to keep for the poller: every one (poll), NCCL's
        once a group whose futures complete at enqueue exists, else none (no per-call check at all)."""
        if self._native is not None:
            polled = self.config.completion == "poll" or any(self.completions.polled_groups.values())
            self._native.set_polling(1 if self.config.completion == "poll" else 0 if polled else -1)

    def _enqueue_futures(self, pg) -> bool:
        """Whether this group's backend completes its futures at enqueue (NCCL): its collectives'
        completions are polled (completions.py)."""
        try:
            name = pg.getBackendName() if hasattr(pg, "getBackendName") else pg._get_backend_name()
        except Exception:  # noqa: BLE001 - a group without a backend name: its futures are trusted
            return False
        return str(name).lower() in ENQUEUE_FUTURES

    def events_issued(self) -> int:
        """Collectives recorded so far (their event ids go from 0)."""
        return self._native.peek_eid() if self._native is not None else self._eid

    def _counters(self) -> list[dict]:
        """J record for a new segment: the last `j` of every group and channel (writer lock held)."""
        seqs = self._native.seqs() if self._native is not None else list(self._seqs.items())
        return [{"k": lf.COUNTERS, "c": [list(kv) for kv in seqs]}]

    def _site(self, w: LogWriter, frame):
        chain, names, stack, _ = callsite.walk(frame, self.config.full_stack)
        user = chain[0] if chain else None
        site = None if user is None else w.site_id(user.f_code.co_filename, user.f_lineno, user.f_code.co_name)
        full = None if stack is None else [w.site_id(*f) for f in stack]
        return site, names, full

    def dtype_name(self, dtype) -> str:
        s = self._dtype_names.get(dtype)
        if s is None:
            s = self._dtype_names[dtype] = str(dtype).replace("torch.", "")
        return s

    # -- the hot path -----------------------------------------------------------------
    def on_issue(self, opname: str, args, frame, async_at: int | None) -> int:
        """Write the record of a wire op before it is issued; return its event id (Python kernels).
        `async_at`: where the op's schema has its async_op argument (None: it has none)."""
        spec = WIRE_OPS[opname]
        api: ApiCall | None = self.tls.api
        pg = _unbox_pg(args[spec.pg])
        is_async = None if async_at is None else (bool(args[async_at]) if async_at < len(args) else True)
        ts = args[spec.tensors] if spec.tensors is not None and spec.tensors < len(args) else None
        reduce_op = None
        if spec.reduce_op is not None:
            if api is not None and api.reduce_op is not None:
                reduce_op = api.reduce_op
            else:  # C++ caller (DDP reducer): reading the ScriptObject costs ~15 us
                reduce_op = int(args[spec.reduce_op].op())
        index = spec.root if spec.root is not None else spec.peer
        p = args[index] if index is not None and index < len(args) else None
        tag = args[spec.tag] if spec.tag is not None and spec.tag < len(args) else 0
        sp = None
        if opname == "alltoall_base_":
            sp = [list(args[4]), list(args[3])] if len(args) > 4 else []
        return self._issue(opname, pg, ts, reduce_op, p, tag, sp, is_async, frame)

    def on_backend_issue(self, opname: str, pg, tensors, reduce_op: int | None = None, peer: int | None = None,
                         tag: int = 0, splits=None, frame=None) -> int:
        """A wire op of a backend written in Python (collcheck.simnccl): torch calls its methods
        instead of c10d's ops, so no kernel sees them and the backend reports each one here, then
        its completion with `finish` when its stream has run it. `peer`: the root or P2P peer."""
        api: ApiCall | None = self.tls.api
        if api is not None and api.reduce_op is not None:
            reduce_op = api.reduce_op
        is_async = True if api is None else api.async_op
        sp = None if opname != "alltoall_base_" else (splits or [])
        return self._issue(opname, pg, tensors, reduce_op, peer, tag, sp, is_async, frame)

    def on_sync(self, frame, eid: int | None, what: str) -> None:
        """The CPU thread is about to wait at a sync point for collective `eid` (a backend whose
        calls return at once, collcheck.simnccl): where it waits is not where its last collective
        was issued. Written at once: the watchdog may abort the process while it waits."""
        w = self.writer
        with w.lock:
            chain = callsite.walk(frame, False)[0]
            rec = {"k": lf.SYNC, "ts": self.now_us(), "w": what}
            if chain:
                code = chain[0].f_code
                rec["s"] = w.site_id(code.co_filename, chain[0].f_lineno, code.co_name)
            if eid is not None:
                rec["i"] = eid
            w.write(rec)

    def _issue(self, opname, pg, ts, reduce_op, p, tag, sp, is_async, frame) -> int:
        w = self.writer
        api: ApiCall | None = self.tls.api
        if ts is not None:
            dt = self.dtype_name
            key = ((dt(ts.dtype), tuple(ts.shape)),) if isinstance(ts, torch.Tensor) else tuple(
                (dt(t.dtype), tuple(t.shape)) for t in ts
            )
        else:
            key = None
        with w.lock:
            chain, names, stack, chain_key = callsite.walk(frame, self.config.full_stack)
            code, line = (chain[0].f_code, chain[0].f_lineno) if chain else (None, 0)
            gname = pg.group_name
            self.tls.issued = (opname, gname)
            # a repeated call (same op, group, tensors, call chain, torch path, thread) reuses its template
            ck = None if sp is not None else (opname, gname, key, reduce_op, p, tag, id(code), line,
                                               tuple(names) if names else None, threading.get_ident(), is_async,
                                               chain_key)
            t = self._py_templates.get(ck)
            if t is None:
                t = self.template(w, opname, pg, gname, key, reduce_op, p, tag, sp, code, line, names, is_async,
                                  callsite.outer_frames(chain))
                if ck is not None and len(self._py_templates) < 65536:
                    self._py_templates[ck] = t
            full = None if stack is None else [w.site_id(*f) for f in stack]
            return self.emit(w, t, api, full)

    def template(self, w: LogWriter, opname, pg, gname, key, reduce_op, p, tag, sp, code, line, names,
                 is_async, outer=None) -> Template:
        """The template of a new combination of op, group, tensors, call chain and thread (writer lock
        held; NativeHooks.issue too). `outer`: (code, line) of the call chain's frames beyond the call
        site, innermost first."""
        t = Template()
        t.op, t.api = opname, WIRE_OPS[opname].api
        site = None if code is None else w.site_id(code.co_filename, line, code.co_name)
        t.o = w.string_id(opname)
        t.g = self.group_id(w, pg, gname)
        t.seq = lf.seq_key(t.g, opname, p)
        f = t.fields = {}
        if key is not None:
            f["t"] = w.tspec_id(key)
        if site is not None:
            f["s"] = site
            if outer:  # the chain, interned: one id per distinct way the program reached the call
                sites = [w.site_id(c.co_filename, ln, c.co_name) for c, ln in reversed(outer)]
                f["ch"] = w.chain_id((*sites, site))
        h = self._thread_id(w)
        if h:
            f["h"] = h
        if reduce_op is not None:
            f["r"] = reduce_op
        if p is not None:
            f["p"] = p
        if tag:
            f["tag"] = tag
        if sp is not None:
            f["sp"] = sp
        t.role, t.label = callsite.purpose(names, opname)
        t.balance = None
        if self.config.live and sp is not None and pg is not None:
            t.balance = live_hash.a2a_balance(sp, pg.rank(), pg.size())
        api = callsite.api_of(names)
        if is_async is None:  # P2P ops have no async_op argument: isend / irecv are async
            is_async = api is None or api in ALWAYS_ASYNC
        c = t.context = {}
        if is_async:
            c["a"] = 1
        if api is None:
            c["n"] = 1
        elif api != t.api:
            c["x"] = w.string_id(api)
        t.signed = (opname, key, reduce_op, p, tag)
        # its group's rolling hash (checkpoints, live mode)
        t.sig = live_hash.signature(*t.signed, t.role, api if api is not None and api != t.api else None)
        return t

    def emit(self, w: LogWriter, t: Template, api: ApiCall | None, full) -> int:
        """Write one C record from its template (writer lock held); returns its event id."""
        rec = {"k": lf.COLL, "o": t.o, "g": t.g, "ts": self.now_us()}
        if full is not None:
            rec["st"] = full
        rec.update(t.fields)
        sig = t.sig
        if api is not None:
            if api.reduce_op is not None and "r" in rec:  # what the user passed
                rec["r"] = api.reduce_op
            if rec.get("r") != t.signed[2] or api.name != t.api:  # (its Signature is not the template's)
                sig = self._api_signature(t, rec.get("r"), api.name)
            if api.async_op:
                rec["a"] = 1
            if api.name != t.api:
                rec["x"] = w.string_id(api.name)
            if api.multi:
                rec["q"] = api.call_id
                rec["qi"] = api.index
                api.index += 1
                if api.returned:  # its earlier blocking wire ops have completed by now
                    self._complete_returned(w, api)
        else:
            rec.update(t.context)
        if self._native is not None:  # one set of counters for both paths (writer lock held)
            eid = self._native.next_eid()
            rec["j"] = j = self._native.next_seq(t.seq)
        else:
            eid = self._eid
            self._eid = eid + 1
            rec["j"] = j = self._seqs.get(t.seq, -1) + 1
            self._seqs[t.seq] = j
        self.live.mix(t.seq, j, sig, t.g, t.balance)
        if "sp" in t.fields:  # (its sizes are not in the signature: ranks of one kind agree on them too)
            self._sizes = roll(self._sizes, sizes_hash(t.g, t.signed[1], t.fields["sp"]))
        self._label(w, rec, t.role, t.label, eid)
        self.completions.drain_queued(w)
        w.write(rec, eid)
        self.completions.track(eid, t.op)
        return eid

    def _api_signature(self, t: Template, reduce_op, api: str) -> int:
        """The signature of a call of template `t` that its API call gave another reduce op or
        public function (cached: a wrapper's calls repeat)."""
        key = (t, reduce_op, api)
        sig = self._api_sigs.get(key)
        if sig is None:
            op, tensors, _, p, tag = t.signed
            sig = live_hash.signature(op, tensors, reduce_op, p, tag, t.role, api if api != t.api else None)
            if len(self._api_sigs) < 65536:
                self._api_sigs[key] = sig
        return sig

    def _complete_returned(self, w: LogWriter, api: ApiCall) -> None:
        """D records for the returned wire ops of a multi-op API call (all_gather_object, ...):
        without them a call blocked in its second op would read as blocked in its first."""
        now = self.now_us()
        for eid, t_ret in api.returned.items():
            self.completions.forget(eid)
            w.done(eid, t_ret, now)
        api.returned.clear()

    def _label(self, w: LogWriter, rec: dict, role, label, eid: int) -> None:
        gid = rec["g"]
        bucket = role == "gradient bucket"
        # bucket k = the k-th bucket all-reduce of one backward pass (or join shadow pass)
        epoch = self._bwd_epoch if bucket and label.startswith("DDP backward") else None
        if self._native is not None:  # its state, shared with the records it writes itself
            index = self._native.label_state(gid, eid, bucket, -1 if epoch is None else epoch)
        else:
            last = self._last_in_group.get(gid)
            self._last_in_group[gid] = eid
            if bucket:
                prev = self._bucket.get(gid)
                go_on = prev is not None and prev[0] == epoch and (epoch is not None or prev[1] == last)
                index = prev[2] + 1 if go_on else 0
                self._bucket[gid] = (epoch, eid, index)
        if role is not None:
            rec["u"] = w.string_id(role)
        if label is not None:  # (a torch internal no table knows: a label, no role)
            rec["l"] = w.string_id(f"{label} {index}" if bucket else label)

    # -- completions and state (completions.py, live/tables.py) -------------------------
    def on_return(self, eid: int, out, error: BaseException | None) -> None:
        """After the op returned (Python kernels): a blocking API call completes when its wrapper
        returns, anything else (async_op=True, C++ callers) when its Work's future completes."""
        t_ret = self.now_us()
        if error is not None:
            self.finish(eid, t_ret, error)
            return
        issued = self.tls.issued
        if issued is not None and issued[1] in self.completions.polled_groups and out is not None:
            if self.completions.keep_polled(eid, t_ret, out[-1] if isinstance(out, tuple) else out, issued):
                return
        api = self.tls.api
        if api is not None and not api.async_op:
            api.returned[eid] = t_ret
            return
        self.completions.watch(self.writer, eid, t_ret, out, issued)

    def on_backend_return(self, eid: int, work) -> None:
        """The op of a backend written in Python returned `work` (collcheck.simnccl): polled."""
        self.completions.keep_polled(eid, self.now_us(), work)

    def poll_completions(self) -> int:
        """One polling round (poller.py): completions seen are written out at once; returns how many
        Works are still kept."""
        left = self.completions.poll()
        w = self.writer
        if self.completions.has_queued() and w is not None:
            with w.lock:
                self.completions.drain(w)
        return left

    def note_source(self, eid: int, rank: int) -> None:
        """The sender a receive returned: a U record, written with the next record (never raises)."""
        w = self.writer
        if w is None:
            return
        try:
            with w.lock:
                w.queue({"k": lf.SOURCE, "i": eid, "p": rank})
        except Exception as exc:  # noqa: BLE001 - the job goes on; recording stops with one warning
            self.fail(exc)

    def finish(self, eid: int, t_ret: int, error: BaseException | None = None) -> None:
        """Op `eid` returned at `t_ret` and has completed now, or failed with `error`."""
        self.completions.finish(self.writer, eid, t_ret, error)

    def drain_completions(self) -> None:
        """Turn completions observed since the last call into D records (writer lock held)."""
        self.completions.drain(self.writer)

    def inflight_items(self) -> list:
        """[(eid, (t_issue_ns, thread ident, op))] of the collectives not completed yet."""
        return self.completions.items()

    def checkpoint(self, why: str) -> None:
        """P record (logfile/checkpoint.py): every group's and channel's count and rolling hash, the
        collectives not completed and those that raised; completions seen so far written first."""
        w = self.writer
        if w is None:
            return
        with w.lock:
            self.completions.drain(w)
            issued = self.events_issued()
            if issued == self._checkpointed:
                return  # the last one still holds: what came since (completions, ...) follows it
            self._checkpointed = issued
            seqs = dict(self._native.seqs()) if self._native is not None else self._seqs
            hashes = self.live.hashes()
            sequences = [(k, j + 1, hashes.get(k, 0)) for k, j in seqs.items()]
            open_eids = [eid for eid, _ in self.completions.items()]
            w.write(checkpoint_record(issued, sequences, why, open_eids, self.completions.failed, w.vocabulary(),
                                      self._sizes))

    def live_state(self) -> dict:
        """What live/publisher.py publishes (writer lock held): LiveTables.state."""
        seqs = dict(self._native.seqs()) if self._native is not None else self._seqs
        return self.live.state(self._group_names, seqs)

    # -- process-level records ---------------------------------------------------------
    def record(self, rec: dict) -> None:
        w = self.writer
        if w is None:
            return
        with w.lock:
            w.write(rec)

    def record_exception(self, exc: BaseException) -> None:
        """X record: type, message and where it was raised (innermost user frame of the traceback)."""
        w = self.writer
        if w is None:
            return
        frames = []
        tb = exc.__traceback__
        while tb is not None:
            frames.append((tb.tb_frame.f_code, tb.tb_lineno))
            tb = tb.tb_next
        user = [f for f in frames if callsite._classify(f[0])[0]] or frames[-1:]
        with w.lock:
            rec = {"k": lf.EXCEPTION, "t": type(exc).__name__, "m": str(exc)[:2000], "ts": self.now_us()}
            if user:
                code, line = user[-1]
                rec["s"] = w.site_id(code.co_filename, line, code.co_name)
            w.write(rec)

    def record_non_member(self, name: str, frame) -> None:
        """N record: public call `name` on a group this rank is not in (torch_api.py)."""
        w = self.writer
        with w.lock:
            site, _, _ = self._site(w, frame)
            r = {"k": lf.NON_MEMBER, "ts": self.now_us(), "x": w.string_id(name), "h": self._thread_id(w)}
            if site is not None:
                r["s"] = site
            w.write(r)

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
            w.keep(rec)  # a later segment repeats the group's creation
            w.write()

    def on_optimizer_step(self, optimizer) -> None:
        """An optimizer finished a step (torch.optim's global hook, session.py): an O record, queued
        to ride with the next write (training steps for `collcheck stats`)."""
        w = self.writer
        if w is None or not self.active:
            return
        with w.lock:
            index = self._optimizers.setdefault(id(optimizer), len(self._optimizers))
            rec = {"k": lf.STEP, "ts": self.now_us()}
            if index:
                rec["o"] = index
            w.queue(rec)

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
