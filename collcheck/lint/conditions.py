"""What a statement's header says, read from its source alone: which ranks a condition lets
through, whether a block may leave early, whether a loop iterates over a rank's data, whether a
`with` is DDP's join."""

from __future__ import annotations

import ast

from . import vocabulary as V
from .syntax import dotted, members_key
from .values import CLEAN, Val

EXIT_CALLS = frozenset({"sys.exit", "exit", "quit", "os._exit"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_LOOPS = (ast.For, ast.While, ast.AsyncFor)


def exits(body: list) -> frozenset:
    """The ways this block may leave early: "return" (return, sys.exit) or "loop" (break,
    continue). A `raise` is not one: it is an error path (an invariant check), not a rank skipping
    work, and the job fails on it wherever the others are."""
    found = set()
    for s in body:
        for node in _walk_no_defs(s):
            if isinstance(node, ast.Return):
                found.add("return")
            elif isinstance(node, (ast.Break, ast.Continue)):
                found.add("loop")
            elif isinstance(node, ast.Call) and dotted(node.func) in EXIT_CALLS:
                found.add("return")
    return frozenset(found)


def _walk_no_defs(node):
    """ast.walk, not into nested functions or classes, nor (for break/continue) into nested loops."""
    if isinstance(node, _SCOPES):
        return
    if isinstance(node, _LOOPS):
        yield from _returns_in(node)
        return
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if isinstance(c, _SCOPES):
                continue
            if isinstance(c, _LOOPS):
                stack.extend(_returns_in(c))
                continue
            stack.append(c)


def _returns_in(loop):
    """A nested loop's returns and exits (its break/continue stay inside it)."""
    stack = list(loop.body + loop.orelse)
    while stack:
        n = stack.pop()
        if isinstance(n, _SCOPES):
            continue
        if isinstance(n, ast.Return) or isinstance(n, ast.Call) and dotted(n.func) in EXIT_CALLS:
            yield n
        stack.extend(ast.iter_child_nodes(n))


def data_like(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        name = (dotted(node.func) or "").rpartition(".")[2]
        if name in ("enumerate", "tqdm", "zip", "iter") and node.args:
            return any(data_like(a) for a in node.args)
        return False
    name = (dotted(node) or "").rpartition(".")[2]
    return bool(name) and bool(V.DATA_NAME.search(name))


def local_count(node: ast.AST, it: Val) -> Val:
    """A loop over `range(n)` with n from this rank's data runs a per-rank number of times."""
    if it.local and isinstance(node, ast.Call) and (dotted(node.func) or "") in ("range", "enumerate"):
        return it
    return CLEAN


def is_join(expr: ast.AST, resolve) -> bool:
    """`with model.join():`, `with Join([...]):`, accelerate's `join_uneven_inputs`."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    if isinstance(target, ast.Attribute) and target.attr in V.JOIN_CONTEXTS:
        return not isinstance(target.value, ast.Constant)
    return resolve(dotted(target)) in V.JOIN_CONTEXTS or (dotted(target) or "") == "Join"


def enumerate_index(loop):
    """The counter of `for i, x in enumerate(...)`: the same on every rank."""
    it, target = loop.iter, loop.target
    if isinstance(it, ast.Call) and dotted(it.func) == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
        return target.elts[0]
    return None


def unwrapped(node) -> ast.AST:
    """An expression without the progress-bar and enumerate wrappers around it."""
    while isinstance(node, ast.Call) and (dotted(node.func) or "").rpartition(".")[2] in V.PASS_THROUGH and node.args:
        node = node.args[0]
    return node


def indexed_by(node) -> str | None:
    """`groups[pair]`: the index a group is picked by, as comparable source."""
    return members_key(node.slice) if isinstance(node, ast.Subscript) else None


def members(test) -> str | None:
    """The ranks `rank in X` / `rank == k` lets through, as comparable source."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, ast.In):
        return members_key(right)
    if isinstance(op, ast.Eq) and isinstance(right, ast.Constant):
        return members_key(ast.List(elts=[right], ctx=ast.Load()))
    return None


def handle_members(test, value) -> str | None:
    """`if group is not None:` / `if group:` on a process group handle: the ranks that hold one,
    its members (a program hands non-members None, as `new_group` hands them a non-member marker)."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot) and \
            isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None:
        test = test.left
    if isinstance(test, (ast.Name, ast.Attribute)):
        v = value(test)
        if v.typ == "group" and v.members is not None:
            return v.members
    return None
