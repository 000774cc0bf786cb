"""A process-group backend with NCCL's semantics on CPU processes, for tests and replays.

    import collcheck.simnccl                  # registers the backend
    dist.init_process_group("simnccl", ...)

No GPU here, and NCCL refuses two ranks on one device: this backend reproduces what NCCL does
that gloo does not (calls return at once, the CPU runs ahead until a sync point, nothing is
checked, a barrier is an all-reduce, the watchdog aborts after the timeout). backend.py says how;
docs/simnccl.md says where it differs from NCCL. `COLLCHECK_SIMNCCL=1` in a program's
environment (with COLLCHECK=1) makes its groups simnccl ones, so an unchanged program runs on it
(capture/use_simnccl.py).
"""

from __future__ import annotations

import datetime
import functools
import sys

import torch
import torch.distributed as dist

from . import order
from .backend import SimNcclGroup, sync_point

NAME = "simnccl"
_SYNC_METHODS = ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__")
_patched = False


def _create(opts, backend_options=None) -> SimNcclGroup:
    timeout = opts.timeout if isinstance(opts.timeout, datetime.timedelta) else datetime.timedelta(minutes=10)
    _patch_sync_points()
    order.install()
    return SimNcclGroup(opts.store, opts.group_rank, opts.group_size, timeout, opts.group_id)


def _patch_sync_points() -> None:
    """Reading a tensor's value on the CPU is a device synchronization under NCCL: the CPU waits
    for the collectives issued before it. Patched once the first simnccl group exists."""
    global _patched
    if _patched:
        return
    _patched = True
    for name in _SYNC_METHODS:
        original = getattr(torch.Tensor, name)

        @functools.wraps(original)
        def synced(self, *args, _original=original, _what=f"Tensor.{name}()", **kwargs):
            sync_point(_what, sys._getframe(1))
            return _original(self, *args, **kwargs)
        setattr(torch.Tensor, name, synced)


def register() -> None:
    if NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(NAME, _create, extended_api=True, devices=["cpu"])


register()

__all__ = ["NAME", "SimNcclGroup", "register", "sync_point"]
