"""Find the user's call site of a collective and name the torch internal that issued it.

Walking ``frame.f_back`` costs ~1-4 us (capture.md); ``traceback``/``inspect`` cost
37 us to 34 ms and are never used here. Each code object is classified once.
"""

from __future__ import annotations

import os
import sys

import torch

from ..knowledge import frames
from ..knowledge import torch_internals as frameworks
from ..logfile.ops import P2P_OPS, PUBLIC_APIS

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_COLLCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# what only the job knows: where this torch and this collcheck are (an editable checkout has no
# site-packages marker); the rest is the recorded path's own markers (knowledge/frames.py)
_ROOTS = ((_TORCH_DIR, frames.TORCH), (_COLLCHECK_DIR, frames.COLLCHECK))
MAX_CHAIN = 48  # frames of a chain kept: the innermost MAX_CHAIN - CHAIN_OUTER and the outermost CHAIN_OUTER
CHAIN_OUTER = 8

_C10D_FILE = "distributed/distributed_c10d.py"
API_PREFIX = "dist."  # a walk's name for a public torch.distributed function: "dist.all_reduce"
_API_NAMES = {name: API_PREFIX + name for name in PUBLIC_APIS}

# id(code object) -> (is_user_frame, name if it is a labelled torch function or a public API else None).
# Keyed by id: hashing a code object hashes its bytecode and constants (microseconds for a
# training script's big main() or module); the code objects are pinned, so no id is reused.
_verdicts: dict = {}
_pinned: list = []


def _classify(code) -> tuple[bool, str | None]:
    """(is the user's frame, name): a torch frame's name is 'file:function' (file relative to the
    torch package), what `frameworks` tables are keyed by; torch's plumbing between a framework and
    the wire has none, a public torch.distributed function is 'dist.<name>'."""
    fn = code.co_filename
    owner, inside = frames.classify(fn, _ROOTS)
    if fn.startswith(frames.FX_GENERATED):  # torch.fx's forward() of a compiled graph: not the user's line
        v = (False, frameworks.COMPILED_GRAPH)
    elif owner == frames.TORCH and inside is not None:
        name = code.co_name
        if inside == _C10D_FILE and name in _API_NAMES:
            v = (False, _API_NAMES[name])
        elif inside in frameworks.PLUMBING_FILES:
            v = (False, None)
        else:
            key = sys.intern(f"{inside}:{name}")
            reader = frameworks.DETAIL_FRAMES.get(key)
            v = (False, key, reader) if reader is not None else (False, key)
    else:
        v = (frames.in_chain(owner), None)
    _pinned.append(code)
    _verdicts[id(code)] = v
    return v


def walk(frame, full: bool):
    """Return (user frames innermost first, torch function names seen innermost first, full stack,
    chain key).

    The user frames are the user's call chain: every frame of the program outside torch,
    collcheck and the standard library (the first is the call site; empty: none, e.g. the C++
    reducer's thread). Names are those below the call site. The full stack is a list of
    (file, line, function) only when `full` is true (collcheck's own frames left out). The chain
    key tells chains apart cheaply: each caller's code (by id: `_classify` pins it) and
    instruction offset (the call site's own line is part of a template's key already).
    """
    names = None
    stack = [] if full else None
    chain = []
    key = []
    verdicts = _verdicts
    while frame is not None:
        code = frame.f_code
        v = verdicts.get(id(code)) or _classify(code)
        if full and not code.co_filename.startswith(_COLLCHECK_DIR):  # (our own wrappers: not the user's)
            stack.append((code.co_filename, frame.f_lineno, code.co_name))
        if v[0]:
            if chain:  # a caller: what tells chains apart (its code, pinned, and position)
                key.append(id(code))
                key.append(frame.f_lasti)
            chain.append(frame)
        elif v[1] is not None and not chain:
            if names is None:
                names = [v[1]]
            else:
                names.append(v[1])
            if len(v) > 2:  # the frame's locals say what for (an FSDP group's module, a placement change)
                d = v[2](frame)
                if d is not None:
                    names.append(d)
        frame = frame.f_back
    if len(chain) > MAX_CHAIN:  # deep recursion: both ends say where the call came from
        chain = chain[:MAX_CHAIN - CHAIN_OUTER] + chain[-CHAIN_OUTER:]
    return chain, names, stack, tuple(key)


def outer_frames(chain: list) -> tuple | None:
    """(code, line) of the chain's frames outside the call site, innermost first; None: none."""
    return tuple((f.f_code, f.f_lineno) for f in chain[1:]) or None


_purposes: dict = {}


def purpose(names: list[str] | None, op: str = "") -> tuple[str | None, str | None]:
    """Cached `_purpose` (the same few torch call paths repeat every step). A label naming a send
    and a recv together (a pipeline's batch of both) keeps the half of this wire op."""
    if not names:
        return None, None
    key = (op, *names)
    hit = _purposes.get(key)
    if hit is None:
        role, label = _purpose(names)
        if label and " + " in label and op in P2P_OPS:
            head, _, halves = label.rpartition(": ")
            half = next((h for h in halves.split(" + ") if h.split(" (")[0].endswith(op.rstrip("_"))), halves)
            label = f"{head}: {half}" if head else half
        hit = _purposes[key] = (role, label)
    return hit


def api_of(names: list | None) -> str | None:
    """The public torch.distributed function a wire op was issued by (the outermost on the way
    from the op to the user's frame), or None: issued below the Python API (C++, functional)."""
    for name in reversed(names or ()):
        if isinstance(name, str) and name.startswith(API_PREFIX):
            return name[len(API_PREFIX):]
    return None


def _purpose(names: list[str] | None) -> tuple[str | None, str | None]:
    """(role, label) of a call issued by torch internals, or (None, None) for user calls.

    The role is what must match across ranks; the label adds the phase for humans,
    e.g. role "gradient bucket", label "join() shadow: gradient bucket". A torch internal no
    table knows gets no role and its module and function as label.
    """
    details = [n for n in names or () if isinstance(n, frameworks.Detail)]
    names = [n for n in names or () if isinstance(n, str) and not n.startswith(API_PREFIX)]
    if not names:
        return None, None
    if frameworks.COMPILED_GRAPH in names:  # a functional collective torch.compile put in a graph
        return None, "torch.compile graph: functional collective"
    role = next((frameworks.ROLES[n] for n in names if n in frameworks.ROLES), None)
    # every detail on the way, outermost first: "up.weight, scatter over tp"
    what = ", ".join(d.text for d in reversed(details) if not d.entry) or None
    if role is not None and what is not None:
        role = f"{role} of {what}"  # the module is part of what must match across ranks
    # innermost phase wins: join's __exit__ encloses main_hook and _sync_final_model
    phase = next((frameworks.PHASES[n] for n in names if n in frameworks.PHASES), None)
    if role is None and names[0] in frameworks.BUCKET_REBUILD_AT:
        role = "bucket rebuild"  # reducer._rebuild_buckets / _push_all_rebuilt_params (C++)
    elif role is None and names[0] == frameworks.REDUCER_AT:
        role, phase = "gradient bucket", "DDP backward"  # the C++ reducer's hooks
    if role is None and phase is None:
        entry = next((frameworks.ENTRY_POINTS[n] for n in reversed(names) if n in frameworks.ENTRY_POINTS), None)
        entry = next((d.text for d in details if d.entry), entry)
        if entry is not None:  # "DTensor.full_tensor(): Shard(0) -> Replicate() over tp"
            return None, f"{entry}: {what or names[0].rpartition(':')[2]}"
        return None, frameworks.describe(names[0]) + (f" ({what})" if what else "")
    if role == "module state broadcast" and phase is None and frameworks.DDP_INIT_AT in names:
        phase = "DDP init"
    if role is None:
        return None, f"{phase}: {frameworks.describe(names[0])}"
    return role, f"{phase}: {role}" if phase else role
