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

from . import ddp, dtensor, fsdp, other, pipelining, training

TABLES = (ddp, dtensor, fsdp, other, pipelining, training)
ROLES: dict[str, str] = {}
PHASES: dict[str, str] = {}
for _table in TABLES:
    ROLES.update({f"{file}:{func}": role for (file, func), role in _table.ROLES.items()})
    PHASES.update({f"{file}:{func}": phase for (file, func), phase in _table.PHASES.items()})

# public calls of a framework without roles (DTensor, pipelining): the outermost names the user's call
ENTRY_POINTS = {f"{file}:{func}": call for t in TABLES for (file, func), call in getattr(t, "ENTRY_POINTS", {}).items()}



class Detail:
    """What a frame's locals say a collective is for ("experts.1", "Shard(0) -> Replicate() over
    tp"), read by a table's reader while the walk passes that frame. One object per text, kept for
    good: its address goes into the recorder's template keys (C++ and Python), so equal details
    give the same template and a new one a new template, without a template per call.
    `entry`: it names the user's call itself (replaces the entry point's text)."""

    __slots__ = ("entry", "text")

    def __init__(self, text: str, entry: bool):
        self.text, self.entry = text, entry

    def __repr__(self) -> str:
        return f"Detail({self.text!r})"


_details: dict[tuple, Detail] = {}
MAX_DETAILS = 4096  # beyond: no detail (a reader whose text never repeats must not grow this without bound)


def detail(text: str | None, entry: bool = False) -> Detail | None:
    if not text:
        return None
    d = _details.get((text, entry))
    if d is None and len(_details) < MAX_DETAILS:
        d = _details[(text, entry)] = Detail(text, entry)
    return d


def _reader(read, entry: bool = False, whole_frame: bool = False):
    """A table's reader made safe (someone else's frame: any failure is no detail). It is given the
    frame's locals, or with `whole_frame` the frame itself (to look at its callers)."""
    def run(frame):
        try:
            return detail(read(frame if whole_frame else frame.f_locals), entry)
        except Exception:  # noqa: BLE001 - never break the job for a label
            return None
    return run


# frames whose locals say what the call is for: 'file:function' -> reader(frame) -> Detail or None
DETAIL_FRAMES = {}
for _table in TABLES:
    for kind, options in (("DETAILS", {}), ("ENTRY_DETAILS", {"entry": True}), ("FRAME_DETAILS", {"whole_frame": True})):
        for (file, func), read in getattr(_table, kind, {}).items():
            DETAIL_FRAMES[f"{file}:{func}"] = _reader(read, **options)

# the name of a frame of code torch.fx generated (a compiled graph's forward): its functional
# collectives are labelled as such, whatever torch ran them through (the first call: AOT dispatch)
COMPILED_GRAPH = "<torch.compile graph>"

# torch's own plumbing between a framework and the wire: never the frame a label names
PLUMBING_FILES = frozenset((
    "distributed/distributed_c10d.py", "distributed/c10d_logger.py", "distributed/_functional_collectives.py",
    "distributed/_functional_collectives_impl.py", "utils/_contextlib.py", "_compile.py", "_dynamo/eval_frame.py",
    "nn/modules/module.py", "utils/hooks.py", "autograd/function.py", "_tensor.py", "autograd/__init__.py",
    "_ops.py", "_library/autograd.py", "_library/custom_ops.py",  # the dispatcher (functional collectives)
    "overrides.py",  # __torch_function__ handling (a TorchFunctionMode is active: collcheck.simnccl)
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
