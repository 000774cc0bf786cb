"""Find the user's call site of a collective and name the torch internal that issued it.

Walking ``frame.f_back`` costs ~1-4 us (capture.md); ``traceback``/``inspect`` cost
37 us to 34 ms and are never used here. Each code object is classified once.
"""

from __future__ import annotations

import contextlib
import os

import torch

from .wire import PUBLIC_APIS

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_COLLCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP_FILES = {os.path.abspath(contextlib.__file__)}
try:  # typing_extensions wraps deprecated torch APIs
    import typing_extensions

    _SKIP_FILES.add(os.path.abspath(typing_extensions.__file__))
except ImportError:  # pragma: no cover
    pass

# torch function name -> purpose "role". Roles are matched across ranks by the diff:
# two calls in the same slot must play the same role (docs/findings.md, semantic mismatch).
# Sources: torch/nn/parallel/distributed.py, torch/distributed/algorithms/join.py,
# torch/distributed/utils.py (torch 2.13).
ROLE_OF_FUNCTION = {
    "_check_global_requires_backward_grad_sync": "backward-sync flag",
    "notify_join_context": "not-joined count",
    "_get_num_nonjoined_procs": "not-joined count",
    "_notify_procs_to_terminate": "not-joined count",
    "_match_all_reduce_for_bwd_pass": "gradient bucket",
    "_match_unused_params_allreduce": "unused-parameter map",
    "_find_common_rank": "authoritative rank",
    "_sync_buffers": "buffer broadcast",
    "_sync_module_buffers": "buffer broadcast",
    "_check_and_sync_module_buffers": "buffer broadcast",
    "_sync_module_states": "module state broadcast",
    "_sync_params_and_buffers": "module state broadcast",
    "_verify_param_shape_across_processes": "parameter shape check",
    "_delayed_all_reduce_hook": "delayed all-reduce",
    "_engine_run_backward": "gradient bucket",  # C++ reducer hooks fire inside backward
}
# Outer torch frames that say in which phase the role was played.
PHASE_OF_FUNCTION = {
    "main_hook": "join() shadow",
    "_sync_final_model": "join() final sync",
    "__exit__": "join()",
    "_pre_forward": "DDP forward",
    "_post_forward": "DDP forward",
    "_engine_run_backward": "DDP backward",
    "_ddp_init_helper": "DDP init",
}
_LABEL_NAMES = set(ROLE_OF_FUNCTION) | set(PHASE_OF_FUNCTION)
_JOIN_FILE = os.path.join("distributed", "algorithms", "join.py")
_C10D_FILE = os.path.join("distributed", "distributed_c10d.py")
API_PREFIX = "dist."  # a walk's name for a public torch.distributed function: "dist.all_reduce"
_API_NAMES = {name: API_PREFIX + name for name in PUBLIC_APIS}

# code object -> (is_user_frame, name if it is a labelled torch function or a public API else None)
_verdicts: dict = {}


def _classify(code) -> tuple[bool, str | None]:
    fn = code.co_filename
    if fn.startswith(_TORCH_DIR):
        name = code.co_name
        if name == "__exit__" and not fn.endswith(_JOIN_FILE):
            name = None
        if name in _API_NAMES and fn.endswith(_C10D_FILE):
            v = (False, _API_NAMES[name])
        else:
            v = (False, name if name in _LABEL_NAMES else None)
    elif fn.startswith(_COLLCHECK_DIR) or fn in _SKIP_FILES or fn.startswith("<frozen"):
        v = (False, None)
    else:
        v = (True, None)
    _verdicts[code] = v
    return v


def walk(frame, full: bool):
    """Return (user frame or None, torch function names seen innermost first, full stack).

    The full stack is a list of (file, line, function) only when `full` is true (collcheck's
    own frames left out).
    """
    names = None
    stack = [] if full else None
    user = None
    verdicts = _verdicts
    while frame is not None:
        code = frame.f_code
        v = verdicts.get(code) or _classify(code)
        if full and not code.co_filename.startswith(_COLLCHECK_DIR):  # (our own wrappers: not the user's)
            stack.append((code.co_filename, frame.f_lineno, code.co_name))
        if v[0]:
            if user is None:
                user = frame
                if not full:
                    break
        elif v[1] is not None and user is None:
            if names is None:
                names = [v[1]]
            else:
                names.append(v[1])
        frame = frame.f_back
    return user, names, stack


_purposes: dict = {}


def purpose(names: list[str] | None) -> tuple[str | None, str | None]:
    """Cached `_purpose` (the same few torch call paths repeat every step)."""
    if not names:
        return None, None
    key = tuple(names)
    hit = _purposes.get(key)
    if hit is None:
        hit = _purposes[key] = _purpose(names)
    return hit


def api_of(names: list[str] | None) -> str | None:
    """The public torch.distributed function a wire op was issued by (the outermost on the way
    from the op to the user's frame), or None: issued below the Python API (C++, functional)."""
    for name in reversed(names or ()):
        if name.startswith(API_PREFIX):
            return name[len(API_PREFIX):]
    return None


def _purpose(names: list[str] | None) -> tuple[str | None, str | None]:
    """(role, label) of a call issued by torch internals, or (None, None) for user calls.

    The role is what must match across ranks; the label adds the phase for humans,
    e.g. role "gradient bucket", label "join() shadow: gradient bucket".
    """
    names = [n for n in names or () if not n.startswith(API_PREFIX)]
    if not names:
        return None, None
    role = next((ROLE_OF_FUNCTION[n] for n in names if n in ROLE_OF_FUNCTION), None)
    if role is None:
        if names[0] not in ("_pre_forward", "main_hook"):
            return None, None
        role = "bucket rebuild"  # reducer._rebuild_buckets / _push_all_rebuilt_params (C++)
    # innermost phase wins: join's __exit__ encloses main_hook and _sync_final_model
    phase = next((PHASE_OF_FUNCTION[n] for n in names if n in PHASE_OF_FUNCTION), None)
    if phase == "DDP backward" and role != "gradient bucket":
        phase = None
    if phase is None and role == "module state broadcast":
        phase = "DDP init"
    return role, f"{phase}: {role}" if phase else role

