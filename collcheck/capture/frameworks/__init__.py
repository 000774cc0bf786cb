"""Which torch internal issued a collective, by torch source file *and* function.

A function name alone is shared across frameworks (`_pre_forward` is DDP's, FSDP1's and FSDP2's;
`_engine_run_backward` runs every backward pass), so each framework's module keys its table by
(file relative to the torch package, function) and cites the torch 2.13 source it relies on.
`ROLES`: what the call is for, compared across ranks (two calls in one slot must play the same
role). `PHASES`: an enclosing frame that says when, for people; `ENTRY_POINTS`: the public call of a
framework without roles (DTensor) the user made. A torch frame no table knows is named by its
module and function (`describe`), never guessed.
"""

from __future__ import annotations

from . import ddp, dtensor, fsdp, other

TABLES = (ddp, dtensor, fsdp, other)
ROLES: dict[str, str] = {}
PHASES: dict[str, str] = {}
for _table in TABLES:
    ROLES.update({f"{file}:{func}": role for (file, func), role in _table.ROLES.items()})
    PHASES.update({f"{file}:{func}": phase for (file, func), phase in _table.PHASES.items()})

# public calls of a framework without roles (DTensor): the outermost names the user's call
ENTRY_POINTS = {f"{file}:{func}": call for (file, func), call in dtensor.ENTRY_POINTS.items()}

# frames whose `self` names what the call is for: the walk passes the object on (object_label)
OBJECT_FRAMES = frozenset(f"{file}:{func}" for file, func in fsdp.OBJECT_FRAMES)
object_label = fsdp.object_label

# torch's own plumbing between a framework and the wire: never the frame a label names
PLUMBING_FILES = frozenset((
    "distributed/distributed_c10d.py", "distributed/c10d_logger.py", "distributed/_functional_collectives.py",
    "distributed/_functional_collectives_impl.py", "utils/_contextlib.py", "_compile.py", "_dynamo/eval_frame.py",
    "nn/modules/module.py", "utils/hooks.py", "autograd/function.py", "_tensor.py", "autograd/__init__.py",
    "_ops.py", "_library/autograd.py", "_library/custom_ops.py",  # the dispatcher (functional collectives)
))

# the C++ issuers reached with nothing of Python in between (see ddp.py)
BUCKET_REBUILD_AT = frozenset(ddp.BUCKET_REBUILD_AT)
REDUCER_AT = ddp.REDUCER_AT
DDP_INIT_AT = ddp.INIT_AT


def describe(name: str) -> str:
    """'torch.distributed.tensor._redistribute.redistribute_local_tensor' for an unknown frame."""
    file, _, func = name.partition(":")
    module = "torch." + file[:-3].replace("/", ".") if file.endswith(".py") else "torch." + file
    return f"{module}.{func}"
