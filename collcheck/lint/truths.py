"""What the program knows where a statement runs: the truth of the uniform tests around it, and
under which of them a rank test with a uniform part holds alike on every rank.

`if not F or rank == 0: state[k] = ...` sets `state` on some ranks only when `F` holds; where the
program has tested `F` false (`if F: ... else: use(state)`) the value is the same everywhere.
"""

from __future__ import annotations

import ast
from dataclasses import replace


def key(node: ast.AST) -> str:
    """A test as comparable text, kept on the node (each function is walked more than once)."""
    found = getattr(node, "_collcheck_key", None)
    if found is None:
        found = node._collcheck_key = ast.dump(node)
    return found


def truths(test: ast.AST, value: bool) -> list[tuple[str, bool]]:
    """What `test` having `value` says about its parts: `not F` false says F; `A and B` true says both."""
    out = [(key(test), value)]
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        out += truths(test.operand, not value)
    elif isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == value:
        for part in test.values:
            out += truths(part, value)
    return out


def vacuous_when(test: ast.AST, value) -> tuple[str, bool] | None:
    """A uniform part of a rank test and the truth value that leaves no rank-dependent part:
    `not F or rank == 0` with F false is true on every rank. None when there is none."""
    for leaf in _leaves(test):
        if value(leaf).varies:
            continue
        for truth in (True, False):
            rest = _residual(test, leaf, truth)
            if isinstance(rest, bool) or not any(value(n).varies for n in rest):
                return key(leaf), truth
    return None


def _leaves(test):
    if isinstance(test, ast.BoolOp):
        for v in test.values:
            yield from _leaves(v)
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        yield from _leaves(test.operand)
    else:
        yield test


def _residual(test, leaf, truth: bool):
    """`test` with `leaf` set to `truth`: a bool when that decides it, else the leaves still read."""
    if test is leaf:
        return truth
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        rest = _residual(test.operand, leaf, truth)
        return (not rest) if isinstance(rest, bool) else rest
    if isinstance(test, ast.BoolOp):
        decisive = not isinstance(test.op, ast.And)  # True decides an `or`, False an `and`
        left = []
        for v in test.values:
            rest = _residual(v, leaf, truth)
            if rest is decisive:
                return decisive
            if not isinstance(rest, bool):
                left += rest
        return left if left else not decisive
    return [test]


def settled(unless: frozenset, known: list) -> bool:
    """Whether what the program knows here makes a value alike: one of its `unless` truths holds,
    or it is alike whichever way one test goes (both truths of one test)."""
    if not unless.isdisjoint(known):
        return True
    tests = [k for k, _ in unless]
    return len(set(tests)) < len(tests)


def correlate(env: dict, test: ast.AST, body: dict, orelse: dict) -> None:
    """After `if F:` (uniform): a name per rank from one arm only is alike where F goes the other
    way (`if rank0_only: state = resync(state)`)."""
    k = key(test)
    for name, v in env.items():
        if v.rank is None:
            continue
        b, e = body.get(name), orelse.get(name)
        clean = True if b is not None and b.rank is None else False if e is not None and e.rank is None else None
        if clean is not None:
            env[name] = replace(v, rank=replace(v.rank, unless=v.rank.unless | {(k, clean)}))
