"""What a walker binds: names to values (item by item for tuples), what a rank branch set made
per rank, and which names hold the rank number itself (for running rank tests, worlds.py).
Each function takes the flow.Walker binding (its env, writes, exact names, function and lint)."""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from . import truths
from . import vocabulary as V
from .findings import Guard
from .syntax import dotted
from .values import CLEAN, Val, join


def atom_kind(w, node) -> str | None:
    """What a rank test reads (worlds.agree): "rank" (the rank number itself), "uniform", or
    None (a value derived from the rank, or this rank's data)."""
    if exact_rank(w, node):
        return "rank"
    if isinstance(node, ast.Call):
        return None
    return None if w.value(node).varies else "uniform"

def exact_rank(w, node) -> bool:
    """`dist.get_rank()`, `w.rank`, a name bound to one, a `rank` parameter: the rank number."""
    if isinstance(node, ast.Call):
        return w.ev.resolve(dotted(node.func)) in V.RANK_CALLS and not node.args and not node.keywords
    if isinstance(node, ast.Attribute) and node.attr in V.RANK_NUMBERS:
        return True
    name = dotted(node)
    return name in w.exact or name in V.RANK_PARAMS and name in w.fn.params and \
        w.value(node).rank is not None

def set_per_rank(w, guard: Guard, since: int) -> None:
    """After a rank branch (or a loop of per-rank count), what it set differs per rank: `if rank
    == 0: metrics["x"] = ...` then `for k in metrics`. Inside the branch it is just a value."""
    origin = guard.origin
    unless = truths.vacuous_when(guard.test, w.value) if guard.test is not None else None
    if unless is not None:
        origin = replace(origin, unless=origin.unless | {unless})  # `if not F or rank == 0:`: alike where F is false
    for name in set(w.writes[since:]):
        v = w.env.get(name, CLEAN)
        if v.rank is None:
            v = w.env[name] = join(v, Val(rank=origin, chosen=True))
            if name.startswith("self.") and name.count(".") == 1 and w.fn.cls:
                w.lint.set_class_attr(w.fn.cls, name[5:], v)

# -- assignment ----------------------------------------------------------------------------
def assign(w, target, v: Val, value_node) -> None:
    if isinstance(target, (ast.Tuple, ast.List)):
        elts = value_node.elts if isinstance(value_node, (ast.Tuple, ast.List)) and \
            len(value_node.elts) == len(target.elts) else None
        items = v.items if v.items is not None and len(v.items) == len(target.elts) and \
            not any(isinstance(t, ast.Starred) for t in target.elts) else None
        for i, t in enumerate(target.elts):
            if elts is not None:
                part = w.value(elts[i])
            elif items is not None:  # `_, group, _ = init()`: each its own
                part = items[i]
            elif i > 0 and v.typ == "engine":  # `engine, optimizer, ... = deepspeed.initialize(...)`
                part = v.data_only()
            else:
                part = v
            assign(w, t.value if isinstance(t, ast.Starred) else t, part, elts[i] if elts else None)
        return
    bind(w, target, v, value_node)

def bind(w, target, v: Val, source: ast.AST | None = None) -> None:
    """`target = v`; `source`: the assigned expression, when there is one."""
    name = dotted(target)
    if isinstance(target, ast.Attribute) and v.rank and _flag_like(target.attr, source) \
            and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
        w.lint.set_rank_attr(target.attr, v.rank)  # `args.is_master = rank == 0`: `.is_master` anywhere
    if isinstance(target, ast.Subscript):
        base = dotted(target.value)
        if base is not None:
            w.env[base] = join(w.ev.lookup(base), v.data_only())
            w.writes.append(base)
        return
    if name is None:
        return
    w.env[name] = v
    w.writes.append(name)
    if source is not None and v.rank is not None and exact_rank(w, source):
        w.exact.add(name)
    else:
        w.exact.discard(name)
    if name.startswith("self.") and name.count(".") == 1 and w.fn.cls:
        w.lint.set_class_attr(w.fn.cls, name[5:], v)
    if isinstance(w.fn.node, ast.Module):
        w.lint.set_global(w.mod, name, v)


_FLAG_NAME = re.compile(r"rank|master|main|zero|chief|leader|primary|first|last", re.IGNORECASE)


def _flag_like(attr: str, source) -> bool:
    """An attribute worth following by its name alone, program-wide: a rank or a rank test
    (`args.is_master = rank == 0`), not any value that happens to mix a rank in (`p.grad = x * rank`)."""
    return bool(_FLAG_NAME.search(attr)) or isinstance(source, (ast.Compare, ast.BoolOp)) or \
        isinstance(source, ast.UnaryOp) and isinstance(source.op, ast.Not)
