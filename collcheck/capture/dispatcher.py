"""BackendSelect kernels on every `c10d::*` op: the one place that sees every caller.

A kernel registered at BackendSelect runs before the real backend for Python
`dist.*`, DDP's C++ reducer, join's shadow collectives, functional collectives and
DTensor alike; c10d ops only have a fallthrough there, so nothing is overridden
(capture.md). The Library object must stay alive or the kernels vanish.

When the compiled fast path is built (fastpath.py) its C++ kernels take the place of
these Python ones; they write the same records through the same Recorder.
"""

from __future__ import annotations

import sys
from typing import Callable

import torch
from torch._C import DispatchKey

from ..logfile.ops import WIRE_OPS
from . import callsite
from .native import fastpath
from .recorder import Recorder

_BACKEND_SELECT = DispatchKey.BackendSelect
_SKIP_KEYS = (DispatchKey.Meta, DispatchKey.Python)  # fake/meta tensors while compiling
_library = None  # None: never installed; True: the compiled kernels; a Library; False: removed
_compiled = False  # the C++ kernels of fastpath.cpp are in use


def async_position(overload) -> int | None:
    """Where an op's schema has its `async_op` argument (the API's `async_op`, True for C++
    callers): None for ops without one (P2P, monitored_barrier_)."""
    names = [a.name for a in overload._schema.arguments]
    return names.index("async_op") if "async_op" in names else None


def _make_kernel(current, opname: str, overload):
    redispatch = overload.redispatch
    async_at = async_position(overload)

    def kernel(keyset, *args, **kwargs):
        rec = current()
        if rec is None or not rec.active or keyset.has(_SKIP_KEYS[0]) or keyset.has(_SKIP_KEYS[1]):
            return redispatch(keyset.remove(_BACKEND_SELECT), *args, **kwargs)
        try:
            eid = rec.on_issue(opname, args, sys._getframe(1), async_at)
        except Exception as exc:
            rec.fail(exc)
            return redispatch(keyset.remove(_BACKEND_SELECT), *args, **kwargs)
        try:
            out = redispatch(keyset.remove(_BACKEND_SELECT), *args, **kwargs)
        except BaseException as exc:
            try:
                rec.on_return(eid, None, exc)
            except Exception as inner:
                rec.fail(inner)
            raise
        try:
            rec.on_return(eid, out, None)
        except Exception as exc:
            rec.fail(exc)
        return out

    return kernel


def install(current: Callable[[], Recorder | None]) -> bool:
    """Register the kernels (idempotent); `current()` is the live recorder, which the compiled
    kernels report to from now on. True: the compiled kernels are in use."""
    global _library, _compiled
    if _library is None:
        _compiled = fastpath.install(callsite._classify, _async_positions())
        _library = True if _compiled else _python_kernels(current)
        _patch_backward(current)
    else:
        _restore(current)  # removed by remove(): the Python kernels again
    rec = current()
    if _compiled and rec is not None:
        fastpath.attach(rec)  # registers the compiled kernels while `rec` records
    elif rec is not None:
        rec.watch_active(lambda on: _restore(current) if on else remove())
    return _compiled


def _restore(current) -> None:
    """Register the Python kernels again after remove()."""
    global _library
    if _library is False:
        _library = _python_kernels(current)


def remove() -> None:
    """Unregister the Python kernels while recording is paused or stopped: with none, the
    dispatcher calls c10d's ops as if collcheck were not there. The compiled kernels come and go
    with the recorder's `active` flag themselves (fastpath.cpp, set_registered)."""
    global _library
    if isinstance(_library, torch.library.Library):
        _library._destroy()
        _library = False


def _async_positions() -> dict[str, int]:
    """op name -> position of its async_op argument (-1: none), for the compiled kernels."""
    out = {}
    for opname in WIRE_OPS:
        packet = getattr(torch.ops.c10d, opname, None)
        if packet is not None:
            pos = async_position(packet.default)
            out[opname] = -1 if pos is None else pos
    return out


def _python_kernels(current):
    lib = torch.library.Library("c10d", "IMPL")
    for opname in WIRE_OPS:
        packet = getattr(torch.ops.c10d, opname, None)
        if packet is None:
            continue
        for overload_name in packet.overloads():
            lib.impl(opname, _make_kernel(current, opname, getattr(packet, overload_name)), "BackendSelect", with_keyset=True)
    return lib


def _patch_backward(current) -> None:
    """Count backward passes so DDP's bucket all-reduces can be numbered per pass."""
    import torch.autograd as autograd
    import torch.autograd.graph as graph

    original = graph._engine_run_backward
    if hasattr(original, "__collcheck_original__"):
        return

    def _engine_run_backward(*args, **kwargs):
        rec = current()
        if rec is not None:
            rec.count_backward_pass()
        return original(*args, **kwargs)

    _engine_run_backward.__collcheck_original__ = original
    graph._engine_run_backward = _engine_run_backward
    if getattr(autograd, "_engine_run_backward", None) is original:
        autograd._engine_run_backward = _engine_run_backward
