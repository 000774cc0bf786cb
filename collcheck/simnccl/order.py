"""Stream order on the CPU: a torch op that uses a tensor a queued collective reads or writes
waits for that collective.

On a GPU the op would be queued on the compute stream behind the collective (`wait()` orders the
streams) and the CPU would go on; here the CPU runs the op itself, so it waits, or it would read
values the collective has not written yet (a job's control flow can depend on them: a loss that
decides an early stop). Metadata (shape, dtype, device) needs no data and does not wait. Only ops
called from Python are seen (a TorchFunctionMode on the thread that created the group): torch's
C++ code (autograd, DDP's reducer) reads what is there.
"""

from __future__ import annotations

import sys

from torch.overrides import TorchFunctionMode

from . import streams

# Tensor methods and properties that read no element
_METADATA = frozenset((
    "__get__", "size", "dim", "ndimension", "numel", "nelement", "is_complex", "is_floating_point",
    "is_contiguous", "element_size", "stride", "storage_offset", "data_ptr", "untyped_storage", "is_pinned",
    "get_device", "is_shared", "is_set_to", "requires_grad_", "register_hook", "__len__", "__hash__", "__repr__",
    "_is_view", "is_inference", "has_names", "type", "_typed_storage",
))


class StreamOrder(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (streams.using and getattr(func, "__name__", "") not in _METADATA
                and not (getattr(func, "__module__", None) or "").startswith("torch.distributed")):  # another collective: queued
            works = _works_using(args, kwargs)
            if works:
                streams.sync_point(f"{getattr(func, '__name__', 'a torch op')} on a collective's tensor",
                                   sys._getframe(1), works)
        return func(*args, **kwargs)


def _works_using(args, kwargs) -> list:
    return streams.works_using(streams.storages([list(args), list(kwargs.values())]))


_installed = False


def install() -> None:
    """On the calling thread (the one that creates the process groups: the training loop's)."""
    global _installed
    if not _installed:
        _installed = True
        StreamOrder().__enter__()
