"""The recorder's side of the compiled kernels (fastpath.cpp): what they call back, with the GIL held.

The C++ kernel writes the record of a call site it has a packed template for; for anything else
(a template's first use, an API call, a busy writer lock, a failed completion) it calls `issue`,
which builds the record through the recorder, byte for byte what the Python kernels write, and
hands the new template over packed. engine_native.NativeEngine.attach passes these methods to the module.
"""

from __future__ import annotations

from ...logfile import format as lf
from ...logfile.writer import _pack
from .. import callsite


class NativeHooks:
    """One recorder's callbacks for the compiled kernels and the templates they write themselves."""

    def __init__(self, recorder, completions, module):
        self._rec = recorder  # recorder.Recorder: builds and writes the records
        self._completions = completions  # the recorder's Completions: completions the kernel took
        self._module = module  # the compiled kernels' module (engine_native.NativeEngine attaches it)
        self._templates: dict = {}  # template id (fastpath.cpp) -> recorder.Template

    def after_fork_in_child(self) -> None:
        self._templates = {}

    def issue(self, tid: int, details: tuple, pg, done, frame):
        """The recorder's on_issue for the compiled kernel, before the op is issued, when it cannot
        write the record itself. `details` is what C++ read (fastpath.cpp), `tid` its template id
        (-1: uncached), `pg` the group on a template's first use, `done` completions it took.
        Returns the event id, -2 - eid when the op's return must be reported (blocking API call),
        None: not recorded."""
        rec = self._rec
        try:
            if not rec.active:
                return None
            w = rec.writer
            api = rec.tls.api
            with w.lock:
                if done:
                    self._completions.add(done)
                t = self._templates.get(tid)
                new = t is None
                if new:
                    opname, gname, specs, reduce_op, p, tag, sp, code, line, names, is_async, outer = details
                    key = None if specs is None else tuple((rec.dtype_name(d), s) for d, s in specs)
                    t = rec.template(w, opname, pg, gname, key, reduce_op, p, tag, sp, code, line, names,
                                     None if is_async < 0 else bool(is_async), outer)
                    if tid >= 0:
                        self._templates[tid] = t
                full = None
                if rec.config.full_stack:  # never handed over: the stack differs per call
                    full = [w.site_id(*f) for f in callsite.walk(frame, True)[2]]
                eid = rec.emit(w, t, api, full)
                if new and tid >= 0 and full is None:
                    self._hand_over(w, tid, t)
        except Exception as exc:
            rec.fail(exc)
            return None
        return -2 - eid if api is not None and not api.async_op else eid

    def _hand_over(self, w, tid: int, t) -> None:
        """Give C++ this template packed: it writes the next records of calls that no Python
        wrapper runs for itself (fastpath.cpp, emit_cached), the bytes Recorder.emit would write."""
        head = {"k": lf.COLL, "o": t.o, "g": t.g}
        mid = dict(t.fields, **t.context)
        labels, bucket = b"", None
        if t.role == "gradient bucket":
            labels, bucket = _pairs({"u": w.string_id(t.role)}), t.label
        elif t.role is not None:
            labels = _pairs({"u": w.string_id(t.role), "l": w.string_id(t.label)})
        elif t.label is not None:  # a torch internal no table knows: a label alone, a fixed field
            mid["l"] = w.string_id(t.label)
        self._module.cache(tid, _pairs(head), _pairs(mid), len(head) + len(mid), t.g, t.op, labels, bucket,
                           bucket is not None and bucket.startswith("DDP backward"), t.seq, t.sig)

    def label_sid(self, label: str, index: int) -> int:
        """C++ met a new bucket index: intern its label (writer lock held by C++)."""
        return self._rec.writer.string_id(f"{label} {index}")

    def returned(self, eid: int, t_ret: int, error) -> None:
        """A blocking API call's op returned, or a recorded op raised (the recorder's on_return)."""
        rec = self._rec
        try:
            api = rec.tls.api
            if error is None and api is not None and not api.async_op:
                api.returned[eid] = t_ret
            else:
                self._completions.finish(rec.writer, eid, t_ret, error)
        except Exception as exc:
            rec.fail(exc)


def _pairs(d: dict) -> bytes:
    """The key/value pairs of a packed map, without its header (writer lock held)."""
    b = _pack(d)
    return b[1:] if len(d) < 16 else b[3:]
