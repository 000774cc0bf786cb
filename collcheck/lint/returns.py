"""What a function returns, when its `return`s sit under rank tests.

`if dist.get_rank() == 0: return True` then `return False` returns a rank test, though neither
expression differs per rank: a return under a condition on the rank (or this rank's data) is as
per-rank as that condition, unless every `return` gives the same expression. One idiom is
exempt: a function that broadcasts from a constant root and then returns its own copy on the
root and the received one elsewhere returns the same thing on every rank.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from .syntax import alike
from .values import CLEAN, RANK, Val, join

BROADCASTS = frozenset({"dist.broadcast()", "dist.broadcast_object_list()"})


def returned(returns: list) -> Val:
    """The function's return value from its (value, guard, expression) returns."""
    if not returns:
        return CLEAN
    nodes = [n if n is not None else ast.Constant(None) for _, _, n in returns]
    if all(alike(n, nodes[0]) for n in nodes[1:]):
        return join(*(v for v, _, _ in returns))
    out = []
    for v, guard, _ in returns:
        if guard is not None:
            taint = Val(rank=guard.origin, chosen=True) if guard.kind == RANK else Val(local=guard.origin)
            joined = join(v, taint)
            v = joined if v.items is None else replace(joined, items=tuple(join(i, taint) for i in v.items))
        out.append(v)
    return join(*out)


def constant_root(node: ast.Call, api: str, roots_table: dict) -> set:
    """{the root} of a broadcast from a constant root (`src=0`), else nothing."""
    if api not in BROADCASTS:
        return set()
    keyword, position = roots_table[api]
    arg = next((k.value for k in node.keywords if k.arg == keyword), None)
    if arg is None and position < len(node.args):
        arg = node.args[position]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
        return {arg.value}
    return set()


def root_keeps_own(guard, roots: set, value) -> bool:
    """Whether a return sits in an arm of `if <rank> == K:` (either arm, or past it when the root
    returned inside) after a broadcast from K."""
    test = guard.test
    if guard.how not in ("branch", "else", "exit") or not roots or not isinstance(test, ast.Compare) or \
            len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    left, right = test.left, test.comparators[0]
    if isinstance(left, ast.Constant):
        left, right = right, left
    return isinstance(right, ast.Constant) and right.value in roots and value(left).rank is not None
