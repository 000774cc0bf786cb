"""Patches of `torch.distributed`: what the wire records cannot tell on their own.

The wire records come from the dispatcher kernels (dispatcher.py), which name the public call
(callsite.api_of) and its async flag themselves. With the compiled kernels no Python runs per
call for most collectives: wrapped then are only the calls that need more, those that put
several ops on the wire (object collectives, batch_isend_irecv: their records carry a call id)
and blocking send and recv, whose gloo Work has no future and whose op has no async_op argument:
they complete when the call returns. (A blocking reduce-scatter has no future on gloo either;
its op says async_op=False, and the compiled kernel waits for it: native/fastpath.cpp, watch.)
The Python kernels keep a wrapper on every public collective: it hands them the reduce op
(cheaper than its ScriptObject) and tells them that a blocking call completes when it returns
(a Python callback on the Work's future would make gloo's threads wait for the GIL). Also
patched: group lifecycle, and torch's warning for a call on a group this rank is not in. Both
`torch.distributed.X` and `distributed_c10d.X` are patched: P2POp checks `op is isend` against
module globals.
"""

from __future__ import annotations

import functools
import inspect
import sys
import time

from ..knowledge import frames
from ..logfile import format as lf
from ..logfile.ops import ALWAYS_ASYNC, PUBLIC_APIS
from .issue import ApiCall
from .recorder import Recorder

# Calls that put several ops on the wire: their wire records carry the call id.
MULTI_OP = frozenset(
    "all_gather_object gather_object scatter_object_list broadcast_object_list send_object_list "
    "recv_object_list batch_isend_irecv".split()
)
# Blocking P2P calls: their gloo Work has no future, their op no async_op flag; they complete when they return.
NO_FUTURE = frozenset(("send", "recv"))
WRAPPED = MULTI_OP | NO_FUTURE  # also with the compiled kernels (the blocking calls of NO_FUTURE)
LIFECYCLE = ("init_process_group", "new_group", "split_group", "destroy_process_group")

_originals: dict[str, object] = {}


def _param_index(fn, name):
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None, None
    for i, p in enumerate(params):
        if p.name == name:
            return i, (None if p.default is inspect.Parameter.empty else p.default)
    return None, None


def _reduce_op_value(op):
    try:
        return int(op)
    except Exception:
        return None  # premul-sum and other ReduceOp objects: the kernel reads it


def _wrap_collective(rec: Recorder, name: str, fn):
    op_index, op_default = _param_index(fn, "op")
    async_index, _ = _param_index(fn, "async_op")
    src_index, _ = _param_index(fn, "src") if name == "recv" else (None, None)
    multi = name in MULTI_OP
    always_async = name in ALWAYS_ASYNC
    no_future = name in NO_FUTURE

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not rec.active or rec.tls.api is not None or (rec.compiled and not (multi or no_future)):
            return fn(*args, **kwargs)
        try:
            op = None
            if op_index is not None:
                op = args[op_index] if len(args) > op_index else kwargs.get("op", op_default)
            if always_async:
                is_async = True
            elif async_index is not None:
                is_async = bool(args[async_index] if len(args) > async_index else kwargs.get("async_op", False))
            else:
                is_async = False
            any_source = name == "recv" and src_index is not None and (
                args[src_index] if len(args) > src_index else kwargs.get("src")) is None and kwargs.get("group_src") is None
            if rec.compiled and not multi and is_async:
                call = None  # async: the compiled kernel records it alone
            else:
                call_id = rec.next_api_call() if multi else 0  # numbers the calls whose wire ops it links
                call = ApiCall(name, call_id, None if op is None else _reduce_op_value(op), multi, is_async)
                rec.set_api_call(call)
        except Exception as exc:
            rec.fail(exc)
            return fn(*args, **kwargs)
        if call is None:
            return fn(*args, **kwargs)
        try:
            out = fn(*args, **kwargs)
            if any_source and out.__class__ is int and out >= 0 and call.returned:  # who sent it (dist.recv says)
                rec.note_source(next(iter(call.returned)), out)
            return out
        except BaseException as exc:
            for eid, t_ret in call.returned.items():
                rec.completions.finish(rec.writer, eid, t_ret, exc)
            call.returned.clear()
            raise
        finally:
            rec.set_api_call(None)
            for eid, t_ret in call.returned.items():
                rec.completions.finish(rec.writer, eid, t_ret)

    wrapper.__collcheck_original__ = fn
    return wrapper


def _wrap_not_in_group(rec: Recorder, fn):
    """torch's warning for a call on a group this rank is not in (new_group's NON_GROUP_MEMBER):
    torch skips the call, and the group's members then wait for a rank that never comes. An N
    record names the public call (the warning's caller) and the user's call site."""

    @functools.wraps(fn)
    def wrapper(op_name, *args, **kwargs):
        try:
            if rec.active and rec.writer is not None:
                caller = sys._getframe(1)
                name = caller.f_code.co_name
                rec.record_non_member(name if name in PUBLIC_APIS else str(op_name), caller)
        except Exception as exc:
            rec.fail(exc)
        return fn(op_name, *args, **kwargs)

    wrapper.__collcheck_original__ = fn
    return wrapper


BLOCKING_LIFECYCLE = frozenset(("new_group", "split_group"))  # wait for every rank: live mode sees a rank in them


def _wrap_lifecycle(rec: Recorder, name: str, fn, on_init, on_end=None):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if name == "destroy_process_group" and not args and kwargs.get("group") is None and on_end is not None:
            on_end(rec)  # the default group (and maybe its store) goes: live mode ends first
        took_us = None
        if name in BLOCKING_LIFECYCLE:
            start = time.monotonic_ns()
            with rec.waiting_in(name, start):
                result = fn(*args, **kwargs)
            took_us = (time.monotonic_ns() - start) // 1000
        else:
            result = fn(*args, **kwargs)
        try:
            _after_lifecycle(rec, name, args, kwargs, result, sys._getframe(1), on_init, took_us)
        except Exception as exc:
            rec.fail(exc)
        return result

    wrapper.__collcheck_original__ = fn
    return wrapper


def _after_lifecycle(rec: Recorder, name, args, kwargs, result, frame, on_init, took_us=None):
    from torch.distributed import distributed_c10d as c10d

    if name == "init_process_group":
        if rec.failed:
            return
        on_init(rec)
        pg = c10d._get_default_group()
        rec.record_group("init", pg, list(range(c10d.get_world_size())), "default_pg", frame)
        return
    if not rec.active:
        return
    if name == "new_group":
        ranks = args[0] if args else kwargs.get("ranks")
        ranks = sorted(ranks) if ranks is not None else list(range(c10d.get_world_size()))
        pg = result if result is not c10d.GroupMember.NON_GROUP_MEMBER else None
        rec.record_group("new", pg, ranks, kwargs.get("group_desc"), frame, {"m": pg is not None, "us": took_us})
    elif name == "split_group":
        pg = result
        ranks = c10d.get_process_group_ranks(pg) if pg is not None else None
        rec.record_group("split", pg, ranks, kwargs.get("group_desc"), frame, {"m": pg is not None, "us": took_us})
    elif name == "destroy_process_group":
        rec.record_group("destroy", None, None, None, frame, {"all": not args and "group" not in kwargs})


def install(rec: Recorder, c10d, on_init, on_end=None) -> None:
    """Patch the public functions (idempotent). `c10d` is torch.distributed.distributed_c10d;
    `on_init(rec)` opens the log once init_process_group knows the rank (session.start_log);
    `on_end(rec)` runs before the default group is destroyed (session.end_live)."""
    import torch.distributed as dist

    for name in [*sorted(PUBLIC_APIS), *LIFECYCLE, "_warn_not_in_group"]:
        current = getattr(c10d, name, None)
        if current is None or hasattr(current, "__collcheck_original__"):
            continue
        if name in LIFECYCLE:
            wrapped = _wrap_lifecycle(rec, name, current, on_init, on_end)
        elif name == "_warn_not_in_group":
            wrapped = _wrap_not_in_group(rec, current)
        else:
            wrapped = _wrap_collective(rec, name, current)
        _originals[name] = current
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is current:
            setattr(dist, name, wrapped)


def unwrap_for_compiled_kernels(c10d) -> None:
    """The compiled kernels name calls themselves: take the wrappers off the collectives that
    do not need one (a module that bound one by name earlier keeps it: it passes through)."""
    import torch.distributed as dist

    for name in PUBLIC_APIS - WRAPPED:
        original = _originals.pop(name, None)
        if original is None:
            continue
        for module in (c10d, dist):
            if hasattr(getattr(module, name, None), "__collcheck_original__"):
                setattr(module, name, original)


def uninstall(c10d) -> None:
    import torch.distributed as dist

    for name, original in _originals.items():
        if getattr(c10d, name, None) is not None and hasattr(getattr(c10d, name), "__collcheck_original__"):
            setattr(c10d, name, original)
        if hasattr(getattr(dist, name, None), "__collcheck_original__"):
            setattr(dist, name, original)
    _originals.clear()


def record_exit(rec: Recorder, clean: bool, exc: BaseException | None = None) -> None:
    """Trailer on interpreter exit; the uncaught exception when there is one."""
    if rec.writer is None:
        return
    try:
        with rec.writer.lock:  # the program's own files, hashed once the job is done with them
            rec.writer.file_hashes(lambda path: frames.owner(path) == frames.USER)
        rec.checkpoint("exception" if exc is not None else "end")
        if exc is not None:
            rec.record_exception(exc)
        if clean:
            rec.record({"k": lf.TRAILER, "ts": rec.now_us(), "wall_ns": time.time_ns()})
    except Exception:
        pass
