"""Patches of `torch.distributed`: API-level context for the wire records, group lifecycle.

The wire records themselves come from the dispatcher kernels (kernels.py); a wrapper
here only tells them which public call they belong to, its reduce op (cheaper than
reading the ScriptObject) and whether it blocks. Both `torch.distributed.X` and
`distributed_c10d.X` are patched: P2POp checks `op is isend` against module globals.
"""

from __future__ import annotations

import functools
import inspect
import sys
import time

from .. import logformat as lf
from .recorder import ApiCall, Recorder

COLLECTIVES = (
    "all_reduce all_reduce_coalesced broadcast reduce all_gather all_gather_into_tensor all_gather_object "
    "all_gather_coalesced gather gather_object scatter scatter_object_list reduce_scatter "
    "reduce_scatter_tensor all_to_all all_to_all_single broadcast_object_list barrier monitored_barrier "
    "send recv isend irecv batch_isend_irecv send_object_list recv_object_list"
).split()
# Calls that put several ops on the wire: their wire records carry the call id.
MULTI_OP = frozenset(
    "all_gather_object gather_object scatter_object_list broadcast_object_list send_object_list "
    "recv_object_list batch_isend_irecv".split()
)
ALWAYS_ASYNC = frozenset(("isend", "irecv", "batch_isend_irecv"))
NON_GROUP_MEMBER = -100  # what new_group returns to non-members (read from torch in install())
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
    group_index, _ = _param_index(fn, "group")
    multi = name in MULTI_OP
    always_async = name in ALWAYS_ASYNC

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not rec._active or rec.tls._api is not None:
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
            call = ApiCall(name, rec.next_api_call(), None if op is None else _reduce_op_value(op), multi, is_async)
            if group_index is not None:
                group = args[group_index] if len(args) > group_index else kwargs.get("group")
                if type(group) is type(NON_GROUP_MEMBER) and group == NON_GROUP_MEMBER:  # torch skips it
                    _record_non_member(rec, name, sys._getframe(1))
            rec.tls.api = call
        except Exception as exc:
            rec.fail(exc)
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except BaseException as exc:
            for eid, t_ret in call.returned.items():
                rec.finish(eid, t_ret, exc)
            call.returned.clear()
            raise
        finally:
            rec.tls.api = None
            for eid, t_ret in call.returned.items():
                rec.finish(eid, t_ret)

    wrapper.__collcheck_original__ = fn
    return wrapper


def _record_non_member(rec: Recorder, name: str, frame) -> None:
    """N record: a call on a group this rank is not in (new_group's NON_GROUP_MEMBER), which
    torch skips with one warning: the group's members then wait for a rank that never comes."""
    w = rec.writer
    if w is None:
        return
    with w.lock:
        site, _, _ = rec._site(w, frame)
        r = {"k": lf.NON_MEMBER, "ts": rec.now_us(), "x": w.string_id(name), "h": rec._thread_id(w)}
        if site is not None:
            r["s"] = site
        w.write(r)


def _wrap_lifecycle(rec: Recorder, name: str, fn, on_init):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        result = fn(*args, **kwargs)
        try:
            _after_lifecycle(rec, name, args, kwargs, result, sys._getframe(1), on_init)
        except Exception as exc:
            rec.fail(exc)
        return result

    wrapper.__collcheck_original__ = fn
    return wrapper


def _after_lifecycle(rec: Recorder, name, args, kwargs, result, frame, on_init):
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
        rec.record_group("new", pg, ranks, kwargs.get("group_desc"), frame, {"m": pg is not None})
    elif name == "split_group":
        pg = result
        ranks = c10d.get_process_group_ranks(pg) if pg is not None else None
        rec.record_group("split", pg, ranks, kwargs.get("group_desc"), frame, {"m": pg is not None})
    elif name == "destroy_process_group":
        rec.record_group("destroy", None, None, None, frame, {"all": not args and "group" not in kwargs})


def install(rec: Recorder, c10d, on_init) -> None:
    """Patch the public functions (idempotent). `c10d` is torch.distributed.distributed_c10d;
    `on_init(rec)` opens the log once init_process_group knows the rank (session.start_log)."""
    import torch.distributed as dist

    global NON_GROUP_MEMBER
    NON_GROUP_MEMBER = getattr(c10d.GroupMember, "NON_GROUP_MEMBER", NON_GROUP_MEMBER)
    for name in [*COLLECTIVES, *LIFECYCLE]:
        current = getattr(c10d, name, None)
        if current is None or hasattr(current, "__collcheck_original__"):
            continue
        wrapped = _wrap_lifecycle(rec, name, current, on_init) if name in LIFECYCLE else _wrap_collective(rec, name, current)
        _originals[name] = current
        setattr(c10d, name, wrapped)
        if getattr(dist, name, None) is current:
            setattr(dist, name, wrapped)


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
        if exc is not None:
            rec.record_exception(exc)
        if clean:
            rec.record({"k": lf.TRAILER, "ts": rec.now_us(), "wall_ns": time.time_ns()})
    except Exception:
        pass
