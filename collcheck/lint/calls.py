"""What a call is: a collective, a framework call that issues collectives, a call of the user's
own function (or an installed package's) that does, or nothing of note. Each function takes the
expressions.Evaluator asking (its module, function, scope and lint)."""

from __future__ import annotations

import ast

from ..knowledge import fixes
from . import vocabulary as V
from .syntax import dotted
from .values import Val

FORWARD_COLLECTIVES = frozenset({"FSDP", "FSDP2", "DeepSpeed"})  # their forward all-gathers the parameters
PACKAGES = {"lightning": ("lightning", "pytorch_lightning", "lightning_fabric"), "accelerate": ("accelerate",),
            "transformers": ("transformers",), "deepspeed": ("deepspeed",), "torchmetrics": ("torchmetrics",)}


class Issued:
    """A call that issues collectives: the API and the chain from this call down to the collective."""

    __slots__ = ("api", "chain", "maybe", "p2p", "wrapped")

    def __init__(self, api: V.Api, chain: tuple = (), wrapped: bool = False, p2p: bool = False, maybe: bool = False):
        self.api, self.chain, self.wrapped, self.p2p = api, chain, wrapped, p2p
        self.maybe = maybe  # issues collectives only sometimes (DDP's forward: buffers, once a bucket rebuild)

    @property
    def uniform_result(self) -> bool:
        """A collective's or framework helper's result is the same on every rank (not a program
        function's, a recorded call's or a model's output)."""
        return not (self.p2p or self.wrapped or self.chain or self.api.framework == "recorded run")


def program_class(ev, node) -> str | None:
    if not isinstance(node.func, (ast.Name, ast.Attribute)):
        return None
    key = ev.lint.program.resolve(ev.mod, dotted(node.func) or "")
    return key if key in ev.lint.program.classes else None

def program_function(ev, node, name: str | None, recv: Val | None = None) -> str | None:
    """The key of the user's function this call runs, when it can be told statically."""
    func = node.func
    if isinstance(func, ast.Name):
        nested = f"{ev.fn.key}.{func.id}" if not ev.fn.key.endswith(":<module>") else None
        if nested in ev.lint.program.functions:
            return nested
        key = ev.lint.program.resolve(ev.mod, func.id)
        if key and key in ev.lint.program.functions:
            return key
        if key:  # a class: its __init__
            return ev.lint.program.method(key, "__init__")
        return None
    if not isinstance(func, ast.Attribute):
        return None
    base = func.value
    if isinstance(base, ast.Name) and base.id in ("self", "cls") and ev.fn.cls:
        return ev.lint.program.method(ev.fn.cls, func.attr)
    if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super" and ev.fn.cls:
        bases = ev.lint.program.classes.get(ev.fn.cls, [])
        for b in bases:
            for ckey in ev.lint.program.class_names.get(b.rpartition(".")[2], ()):
                found = ev.lint.program.method(ckey, func.attr)
                if found:
                    return found
        return None
    typ = (recv if recv is not None else ev.value(base)).typ
    if typ and ":" in typ:
        return ev.lint.program.method(typ, func.attr)
    key = ev.lint.program.resolve(ev.mod, dotted(func) or "")
    return key if key in ev.lint.program.functions else None

def classify(ev, node, name, recv, fval, passed, key) -> Issued | None:
    """What this call issues, if it issues collectives (P2P marked so: never a finding)."""
    if name in V.P2P:
        return Issued(V.Api(name.rpartition(".")[2], ""), p2p=True)
    if name in V.COLLECTIVES:
        what = V.COLLECTIVES[name]
        return Issued(V.Api(what, V.collective_fix(what), sometimes=what in V.SOMETIMES))
    if name in V.WRAPPERS and V.WRAPPERS[name] == "DDP":
        return Issued(V.Api("DistributedDataParallel(...)", fixes.WRAP_IN_DDP))
    func = node.func
    if isinstance(func, ast.Attribute):
        found = _method(ev, node, func, name, recv)
        if found is not None:
            return found
    elif fval.wrapped:
        return _forward(fval.wrapped)
    elif fval.params and not fval.wrapped and isinstance(func, ast.Name):
        ev.scope.param_calls.setdefault(min(fval.params), node)  # `model(x)` of a parameter: the caller's model
    framework = _framework_function(ev, node, name)
    if framework is not None:
        return framework
    if key is not None:
        return ev.lint.issued_by(ev, key, node, passed)
    return ev.lint.library_call(name) or ev.lint.learned_call(ev.mod, node, name)

def _method(ev, node, func, name, recv) -> Issued | None:
    meth = func.attr
    if meth in V.COLLECTIVE_METHODS:
        what = V.COLLECTIVE_METHODS[meth]
        return Issued(V.Api(what, V.collective_fix(what), "DTensor", sometimes=what in V.SOMETIMES))
    if meth == "backward" and recv.output_of:
        return _backward(recv.output_of)
    if recv.wrapped and meth == "forward":
        return _forward(recv.wrapped)
    if recv.wrapped == "FSDP" and meth in V.FSDP_METHODS:
        return Issued(V.Api(f"FSDP `{meth}()` (gathers the sharded state)", fixes.fsdp_state(meth), "FSDP"))
    receiver = dotted(func.value) or ""
    fits = [(named, api) for hint, api, named in V.framework_apis().get(meth, ())
            if V.receiver_matches(hint, receiver, recv.typ) and _keyword_set(node, api.needs_keyword)]
    best = next((api for named, api in fits if named and V.receiver_matches(named, receiver, recv.typ)), None)
    if fits:
        return Issued(best or fits[0][1])
    if recv.typ and recv.typ.startswith("lib:"):  # an installed package's object: its method, from its source
        return ev.lint.library_call(f"{recv.typ[4:]}.{meth}")
    return None

def _framework_function(ev, node, name) -> Issued | None:
    if not name or "." not in name:
        return None
    package, func = name.split(".")[0], name.rpartition(".")[2]
    for hint, api, _ in V.framework_apis().get(func, ()):
        if hint in (None, V.BARE) and package in PACKAGES.get(api.framework, ()) and \
                _keyword_set(node, api.needs_keyword):
            return Issued(api)
    return None


def _keyword_set(node: ast.Call, keyword: str | None) -> bool:
    if keyword is None:
        return True
    for k in node.keywords:
        if k.arg == keyword:
            return not (isinstance(k.value, ast.Constant) and not k.value.value)
    return False


def _forward(kind: str) -> Issued:
    """A wrapped model's forward: FSDP's and DeepSpeed's gather parameters; DDP's broadcasts buffers
    (BatchNorm's statistics) and rebuilds buckets, so it counts under a branch, not as a loop's count
    (there the backward is the collective every iteration issues)."""
    sure = kind in FORWARD_COLLECTIVES
    return Issued(V.Api(f"the forward of the {kind}-wrapped model" + ("" if sure else " (its buffer broadcast)"),
                        fixes.wrapped_forward(kind), kind), wrapped=True, maybe=not sure)


def _backward(kind: str) -> Issued:
    return Issued(V.Api(f"`.backward()` of the {kind}-wrapped model's output (its gradient collectives)",
                        fixes.wrapped_backward(), kind), wrapped=True)
