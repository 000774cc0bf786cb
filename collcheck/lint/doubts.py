"""Why a call under a rank condition may still be issued alike on every rank: the reasons that
make a finding a warning rather than an error, each tied to a shape of the program lint cannot
follow to the end."""

from __future__ import annotations

import ast

from .conditions import exits as kinds_of
from .syntax import dotted, imported_name

RPC_CALLS = frozenset({"torch.distributed.rpc.remote", "torch.distributed.rpc.rpc_sync",
                       "torch.distributed.rpc.rpc_async", "torch.distributed.rpc.api.remote",
                       "torch.distributed.rpc.api.rpc_sync", "torch.distributed.rpc.api.rpc_async"})
RPC_DEPTH = 3  # program calls followed from a rank dispatch's arms to an RPC call


def rpc(call: str) -> str:
    return (f"a rank of this dispatch starts work on other ranks over RPC (`{call}`), whose collectives "
            "lint does not place on ranks")


def two_ranks(test: str) -> str:
    return f"`{test}` compares two rank values, which may be the same rank read twice (alike on every rank)"


def opaque(iterable: str) -> str:
    return (f"how many items `{iterable}` has on each rank is not known: it comes from a call whose source "
            "lint does not read")


def exits(body: list, orelse: list) -> str:
    """Both arms leave early, each only under a further condition on its data: exits that may
    correspond across ranks (data a broadcast made alike), which the source cannot show."""
    if _nested_exits(body) and _nested_exits(orelse):
        return ("both arms of the rank test leave early only under further conditions, which may hold alike "
                "on the ranks (data made to correspond earlier)")
    return ""


def _nested_exits(body: list) -> bool:
    if not body or not kinds_of(body):
        return False
    return not any(isinstance(s, (ast.Return, ast.Break, ast.Continue)) for s in body)


def rpc_dispatch(lint, ev, node: ast.If) -> str:
    """The RPC call an `if`/`elif` chain on the rank reaches in any arm (directly or through the
    program's functions, RPC_DEPTH calls deep), as source; '' when none."""
    seen: set = set()
    return _rpc_in(lint, ev.fn, ev.resolve, list(node.body) + list(node.orelse), RPC_DEPTH, seen)


def _rpc_in(lint, fn, resolve, stmts: list, depth: int, seen: set) -> str:
    for s in stmts:
        for n in ast.walk(s):
            if not isinstance(n, ast.Call):
                continue
            name = resolve(dotted(n.func))
            if name in RPC_CALLS:
                return fn.module.text(n, 60)
            if depth <= 0:
                continue
            key = _callee(lint, fn, n)
            if key is not None and key not in seen:
                seen.add(key)
                callee = lint.program.functions[key]
                found = _rpc_in(lint, callee, lambda d, m=callee.module: imported_name(m, d), callee.node.body,
                                depth - 1, seen)
                if found:
                    return found
    return ""


def _callee(lint, fn, call: ast.Call) -> str | None:
    func, prog = call.func, lint.program
    if isinstance(func, ast.Name):
        key = prog.resolve(fn.module, func.id)
        return key if key in prog.functions else None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" and fn.cls:
        return prog.method(fn.cls, func.attr)
    return None
