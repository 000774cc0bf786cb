"""Writing a collective's C record: the Python kernels' hot path, and every template's first record.

Per collective: classify the call site (cached per code object), look up interned ids, build one
small map, one write(2). Everything else (analysis, pretty names) happens in the reader, never
here. The fields that repeat for one call site, op, group, tensor spec and thread form a Template:
the Python kernels build one per distinct call; the compiled kernels (native/) cache them packed,
write a template's first record through `emit` and the later ones themselves, byte for byte what
`emit` would write. Counters and tables both paths share live in the recorder's engine
(engine_python.py, engine_native.py), which `emit` calls without asking which one it is.
"""

from __future__ import annotations

import threading

import torch

from ..logfile import format as lf
from ..logfile.checkpoint import roll, sizes_hash
from ..logfile.ops import ALWAYS_ASYNC, WIRE_OPS
from ..logfile.writer import LogWriter
from . import callsite
from .live import tables as live_hash

_unbox_pg = torch._C._distributed_c10d.ProcessGroup.unbox


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


class _Issued(threading.local):
    """Per thread: (op, group name) of the op this thread issued last (the Python kernels' on_return)."""

    op: tuple | None = None


class Template:
    """Interned fields of a C record that only depend on its op, group, tensors, call site and thread."""

    # context: what the API call adds when no Python wrapper runs (the usual case): async (`a`), the
    # public function when it is not the op's usual one (`x`), or issued below the Python API (`n`)
    # sig: live_hash.signature of the op (its group's rolling hash: checkpoints, live mode)
    # balance: live_hash.a2a_balance of an all_to_all_single's split sizes (None: none)
    # signed: (op, tensors, reduce op, peer, tag): the signature's fields (an API call may change two)
    __slots__ = ("api", "balance", "context", "fields", "g", "label", "o", "op", "role", "seq", "sig", "signed")


class Issuer:
    """One recorder's C records: its templates, their cached signatures and the all-to-all sizes hash."""

    def __init__(self, rec):
        self._rec = rec  # recorder.Recorder: writer, thread state, ids, engine, completions, live tables
        self._templates: dict[tuple, Template] = {}  # what fixes a template (Python kernels) -> it
        self._api_sigs: dict[tuple, int] = {}  # (template, reduce op, API) -> signature (_api_signature)
        self._dtype_names: dict = {}
        self._issued = _Issued()
        self.sizes = 0  # rolling hash of the all_to_all_single sizes issued (checkpoint.sizes_hash)

    def after_fork_in_child(self) -> None:
        self._issued = _Issued()
        self._templates = {}
        self._api_sigs = {}
        self.sizes = 0

    def dtype_name(self, dtype) -> str:
        s = self._dtype_names.get(dtype)
        if s is None:
            s = self._dtype_names[dtype] = str(dtype).replace("torch.", "")
        return s

    def on_issue(self, opname: str, args, frame, async_at: int | None) -> int:
        """Write the record of a wire op before it is issued; return its event id (Python kernels).
        `async_at`: where the op's schema has its async_op argument (None: it has none)."""
        spec = WIRE_OPS[opname]
        api: ApiCall | None = self._rec.tls.api
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
        api: ApiCall | None = self._rec.tls.api
        if api is not None and api.reduce_op is not None:
            reduce_op = api.reduce_op
        is_async = True if api is None else api.async_op
        sp = None if opname != "alltoall_base_" else (splits or [])
        return self._issue(opname, pg, tensors, reduce_op, peer, tag, sp, is_async, frame)

    def _issue(self, opname, pg, ts, reduce_op, p, tag, sp, is_async, frame) -> int:
        rec = self._rec
        w = rec.writer
        api: ApiCall | None = rec.tls.api
        if ts is not None:
            dt = rec.dtype_name  # (the recorder's: one table for both paths)
            key = ((dt(ts.dtype), tuple(ts.shape)),) if isinstance(ts, torch.Tensor) else tuple(
                (dt(t.dtype), tuple(t.shape)) for t in ts
            )
        else:
            key = None
        with w.lock:
            chain, names, stack, chain_key = callsite.walk(frame, rec.config.full_stack)
            code, line = (chain[0].f_code, chain[0].f_lineno) if chain else (None, 0)
            gname = pg.group_name
            self._issued.op = (opname, gname)
            # a repeated call (same op, group, tensors, call chain, torch path, thread) reuses its template
            ck = None if sp is not None else (opname, gname, key, reduce_op, p, tag, id(code), line,
                                               tuple(names) if names else None, threading.get_ident(), is_async,
                                               chain_key)
            t = self._templates.get(ck)
            if t is None:
                t = self.template(w, opname, pg, gname, key, reduce_op, p, tag, sp, code, line, names, is_async,
                                  callsite.outer_frames(chain))
                if ck is not None and len(self._templates) < 65536:
                    self._templates[ck] = t
            full = None if stack is None else [w.site_id(*f) for f in stack]
            return self.emit(w, t, api, full)

    def on_return(self, eid: int, out, error: BaseException | None) -> None:
        """After the op returned (Python kernels): a blocking API call completes when its wrapper
        returns, anything else (async_op=True, C++ callers) when its Work's future completes."""
        rec = self._rec
        t_ret = rec.now_us()
        if error is not None:
            rec.finish(eid, t_ret, error)
            return
        issued = self._issued.op
        completions = rec.completions
        if issued is not None and issued[1] in completions.polled_groups and out is not None:
            if completions.keep_polled(eid, t_ret, out[-1] if isinstance(out, tuple) else out, issued):
                return
        api = rec.tls.api
        if api is not None and not api.async_op:
            api.returned[eid] = t_ret
            return
        completions.watch(rec.writer, eid, t_ret, out, issued)

    def template(self, w: LogWriter, opname, pg, gname, key, reduce_op, p, tag, sp, code, line, names,
                 is_async, outer=None) -> Template:
        """The template of a new combination of op, group, tensors, call chain and thread (writer lock
        held; NativeHooks.issue too). `outer`: (code, line) of the call chain's frames beyond the call
        site, innermost first."""
        rec = self._rec
        t = Template()
        t.op, t.api = opname, WIRE_OPS[opname].api
        site = None if code is None else w.site_id(code.co_filename, line, code.co_name)  # (interning order:
        t.o = w.string_id(opname)  # the log's ids, the same on both paths and as before)
        t.g = rec.group_id(w, pg, gname)
        t.seq = lf.seq_key(t.g, opname, p)
        t.fields = _fields(w, key, site, outer, rec.thread_id, reduce_op, p, tag, sp)
        t.role, t.label = callsite.purpose(names, opname)
        t.balance = None
        if rec.config.live and sp is not None and pg is not None:
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
        rec = self._rec
        r = {"k": lf.COLL, "o": t.o, "g": t.g, "ts": rec.now_us()}
        if full is not None:
            r["st"] = full
        r.update(t.fields)
        sig = t.sig
        if api is not None:
            sig = self._api_fields(w, t, api, r)
        else:
            r.update(t.context)
        engine = rec.engine  # one set of counters for both paths (writer lock held)
        eid = engine.next_eid()
        r["j"] = j = engine.next_seq(t.seq)
        rec.live.mix(t.seq, j, sig, t.g, t.balance)
        if "sp" in t.fields:  # (its sizes are not in the signature: ranks of one kind agree on them too)
            self.sizes = roll(self.sizes, sizes_hash(t.g, t.signed[1], t.fields["sp"]))
        self._label(w, r, t.role, t.label, eid)
        rec.completions.drain_queued(w)
        w.write(r, eid)
        rec.completions.track(eid, t.op)
        return eid

    def _api_fields(self, w: LogWriter, t: Template, api: ApiCall, r: dict) -> int:
        """What the API call running on this thread adds to record `r`; returns its signature."""
        sig = t.sig
        if api.reduce_op is not None and "r" in r:  # what the user passed
            r["r"] = api.reduce_op
        if r.get("r") != t.signed[2] or api.name != t.api:  # (its Signature is not the template's)
            sig = self._api_signature(t, r.get("r"), api.name)
        if api.async_op:
            r["a"] = 1
        if api.name != t.api:
            r["x"] = w.string_id(api.name)
        if api.multi:
            r["q"] = api.call_id
            r["qi"] = api.index
            api.index += 1
            if api.returned:  # its earlier blocking wire ops have completed by now
                self._complete_returned(w, api)
        return sig

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
        now = self._rec.now_us()
        completions = self._rec.completions
        for eid, t_ret in api.returned.items():
            completions.forget(eid)
            w.done(eid, t_ret, now)
        api.returned.clear()

    def _label(self, w: LogWriter, r: dict, role, label, eid: int) -> None:
        bucket = role == "gradient bucket"
        # bucket k = the k-th bucket all-reduce of one backward pass (or join shadow pass: epoch -1)
        epoch = self._rec.backward_passes if bucket and label.startswith("DDP backward") else -1
        index = self._rec.engine.label_state(r["g"], eid, bucket, epoch)
        if role is not None:
            r["u"] = w.string_id(role)
        if label is not None:  # (a torch internal no table knows: a label, no role)
            r["l"] = w.string_id(f"{label} {index}" if bucket else label)


def _fields(w: LogWriter, key, site, outer, thread_id, reduce_op, p, tag, sp) -> dict:
    """A template's fixed fields, interned in this order: tensors, call site and chain, thread
    (`thread_id(w)`), reduce op, root/peer, tag, splits."""
    f = {}
    if key is not None:
        f["t"] = w.tspec_id(key)
    if site is not None:
        f["s"] = site
        if outer:  # the chain, interned: one id per distinct way the program reached the call
            sites = [w.site_id(c.co_filename, ln, c.co_name) for c, ln in reversed(outer)]
            f["ch"] = w.chain_id((*sites, site))
    thread = thread_id(w)
    if thread:
        f["h"] = thread
    if reduce_op is not None:
        f["r"] = reduce_op
    if p is not None:
        f["p"] = p
    if tag:
        f["tag"] = tag
    if sp is not None:
        f["sp"] = sp
    return f
