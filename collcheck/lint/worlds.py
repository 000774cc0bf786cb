"""Whether a tree of rank tests gives every rank the same collectives, decided by running it.

Ranks that take turns (`for r in range(world): if me == to: ... if r == me: ... else: ...`)
split their work over nested tests on the rank, a uniform loop index and a uniform argument; no
arm alone is issued by every rank, yet each iteration every rank issues the same collectives.
Reading such a tree arm by arm cannot see it; running it can: the tree's tests are evaluated for
every rank of a small world and every value of the uniform names they read, and the collectives
each rank reaches are compared. Only trees made of `if`s over comparisons are run; anything else
(a loop, an early exit, a test on data, a name the tree rebinds) leaves the decision to the walk.
"""

from __future__ import annotations

import ast
import itertools
import operator

from .syntax import dotted

WORLD = range(4)
MAX_FREE = 3  # uniform names a tree may read: WORLD ** MAX_FREE * len(WORLD) runs at most

_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}
_ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mod: operator.mod, ast.FloorDiv: operator.floordiv,
          ast.Mult: operator.mul}
_ME = "<rank>"


class _Unknown(Exception):
    """The tree holds something this module does not run."""


def agree(tree: ast.If, kind_of, issued_at: dict) -> bool:
    """Whether every rank of every small world issues the same collectives (by name, in order)
    through `tree`. `kind_of(node)` tells an atom of a test: "rank", "uniform" or None (data);
    `issued_at` maps a call's (line, column) to the collective it issues."""
    try:
        atoms = _atoms(tree, kind_of)
        free = sorted(atoms - {_ME})
        if _ME not in atoms or len(free) > MAX_FREE:
            return False
        for values in itertools.product(WORLD, repeat=len(free)):
            env = dict(zip(free, values))
            seen = {tuple(_run([tree], {**env, _ME: me}, issued_at, atoms)) for me in WORLD}
            if len(seen) > 1:
                return False
        return True
    except (_Unknown, TypeError, KeyError, ZeroDivisionError):
        return False


def _atoms(tree: ast.If, kind_of) -> set:
    """The names the tree's tests read: `_ME` for the rank, their source for uniform ones."""
    out, ranks = set(), set()
    for test in _tests(tree):
        for node in _leaves(test):
            kind = kind_of(node)
            if kind == "rank":
                ranks.add(dotted(node) or ast.dump(node))
                out.add(_ME)
            elif kind == "uniform":
                out.add(_key(node))
            else:
                raise _Unknown
    if len(ranks) > 1:
        raise _Unknown  # two rank values (`local_rank`, `rank`): not one rank of one world
    return out


def _tests(tree: ast.If):
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If):
            yield node.test
            stack.extend(node.body + node.orelse)


def _leaves(test):
    """The names, attributes and calls a test compares (constants and operators aside)."""
    if isinstance(test, ast.BoolOp):
        for v in test.values:
            yield from _leaves(v)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, (ast.Not, ast.USub)):
        yield from _leaves(test.operand)
    elif isinstance(test, ast.Compare):
        for part in [test.left, *test.comparators]:
            yield from _leaves(part)
    elif isinstance(test, ast.BinOp) and type(test.op) in _ARITH:
        yield from _leaves(test.left)
        yield from _leaves(test.right)
    elif isinstance(test, (ast.Tuple, ast.List, ast.Set)):
        for e in test.elts:
            yield from _leaves(e)
    elif isinstance(test, (ast.Name, ast.Attribute, ast.Call)):
        yield test
    elif not (isinstance(test, ast.Constant) and isinstance(test.value, (int, type(None)))):
        raise _Unknown


def _key(node) -> str:
    return dotted(node) or ast.dump(node)


def _run(stmts: list, env: dict, issued_at: dict, atoms: set) -> list:
    out = []
    for s in stmts:
        if isinstance(s, ast.If):
            out += _run(s.body if _eval(s.test, env, atoms) else s.orelse, env, issued_at, atoms)
        elif isinstance(s, (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Pass)):
            for t in getattr(s, "targets", [getattr(s, "target", None)]):
                if t is not None and _key(t) in atoms:
                    raise _Unknown  # the tree rebinds a name its tests read
            calls = sorted((n for n in ast.walk(s) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
            out += [issued_at[(n.lineno, n.col_offset)] for n in calls if (n.lineno, n.col_offset) in issued_at]
        else:
            raise _Unknown  # loops, early exits, nested definitions: the walk decides
    return out


def _eval(node, env: dict, atoms: set):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BoolOp):
        parts = (_eval(v, env, atoms) for v in node.values)
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env, atoms)
        return (not v) if isinstance(node.op, ast.Not) else -v
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env, atoms)
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env, atoms)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BinOp):
        return _ARITH[type(node.op)](_eval(node.left, env, atoms), _eval(node.right, env, atoms))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [_eval(e, env, atoms) for e in node.elts]
    key = _key(node)
    return env[key] if key in env else env[_ME]
