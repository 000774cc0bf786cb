"""The rules on a collective's arguments rather than on the conditions around it: a root each
rank takes from its own rank or data (rank-root), a tensor whose shape or split sizes may differ
per rank (rank-shape). Each reads one call, as the walker evaluated its arguments."""

from __future__ import annotations

import ast
import os

from ..knowledge import fixes
from . import vocabulary as V
from .calls import Issued
from .findings import P2P_RULE, ROOT_RULE, SHAPE_RULE, Finding
from .values import CLEAN, Origin

# rooted collectives (by the name findings give them): the root's keyword and its position
ROOTS = {"dist.broadcast()": ("src", 1), "dist.reduce()": ("dst", 1), "dist.gather()": ("dst", 2),
         "dist.scatter()": ("src", 2), "dist.broadcast_object_list()": ("src", 1),
         "dist.scatter_object_list()": ("src", 2), "dist.gather_object()": ("dst", 2)}


def root_finding(w, node: ast.Call, issued: Issued, args: list, kwargs: dict) -> Finding | None:
    """A rooted collective (broadcast, reduce, gather, scatter and their object forms) whose root
    each rank takes from its own rank or data: the ranks name different roots."""
    at = ROOTS.get(issued.api.name)
    if at is None or node.lineno in w.mod.ignored:
        return None
    keyword, position = at
    value, arg = None, None
    for k in node.keywords:
        if k.arg in (keyword, f"group_{keyword}"):
            value, arg = kwargs.get(k.arg), k.value
    if arg is None and position < len(node.args) and not isinstance(node.args[position], ast.Starred):
        value, arg = args[position], node.args[position]
    origin = value.origin if value is not None else None
    if origin is None:
        return None
    group, _ = group_of(node, args, kwargs)
    if group.rank is not None:
        return  # a group chosen per rank: the root may be chosen with it (each group's own first rank)
    subgroup = group is not CLEAN or any(k.arg in ("group", "process_group", "pg") for k in node.keywords)
    return (Finding(
        w.mod.path, node.lineno, node.col_offset, w.mod.text(node), issued.api.name, w.mod.path,
        arg.lineno, w.mod.text(arg), "root", origin.kind, why(origin, w.mod.path), fixes.same_root(keyword),
        [(w.mod.path, node.lineno, w.mod.text(node))], issued.api.framework, rule=ROOT_RULE,
        subgroup=subgroup))


def shape_finding(w, node: ast.Call, issued: Issued, args: list, kwargs: dict) -> Finding | None:
    """A collective of a tensor whose shape may differ per rank (rank-shape), or an all-to-all whose
    output split sizes this rank computed alone instead of receiving them (always warnings)."""
    if node.lineno in w.mod.ignored:
        return None
    api = issued.api.name
    found = None
    if api in V.SAME_SHAPE and args and args[0].shaped is not None:
        found = ("shape", node.args[0], args[0].shaped)
    elif api == "dist.all_to_all_single()":
        k = next((k for k in node.keywords if k.arg == V.RECEIVED_SPLITS), None)
        v = kwargs.get(V.RECEIVED_SPLITS) if k is not None else None
        if v is not None and v.origin is not None:
            found = ("splits", k.value, v.origin)
    if found is None:
        return None
    how, arg, origin = found
    return (Finding(
        w.mod.path, node.lineno, node.col_offset, w.mod.text(node), api, w.mod.path, arg.lineno,
        w.mod.text(arg), how, origin.kind, why(origin, w.mod.path), fixes.same_shape(how == "splits"),
        [(w.mod.path, node.lineno, w.mod.text(node))], issued.api.framework, rule=SHAPE_RULE))


def p2p_order(w, node: ast.Call, name: str, args: list, kwargs: dict) -> Finding | None:
    """A blocking receive from a peer this function sent to first with a blocking send, both on
    every rank (no condition around either) and the peer taken from the rank (`1 - rank`): every
    rank is in its send, none in a receive. `w.sends` keeps the sends awaiting their receive."""
    if w.guards or name not in ("send", "recv") or node.lineno in w.mod.ignored:
        return None
    keyword = "dst" if name == "send" else "src"
    peer = next((k.value for k in node.keywords if k.arg == keyword), node.args[1] if len(node.args) > 1 else None)
    value = kwargs.get(keyword) if any(k.arg == keyword for k in node.keywords) else args[1] if len(args) > 1 else None
    if peer is None or value is None or value.rank is None:
        return None
    key = ast.dump(peer)
    if name == "send":
        w.sends.setdefault(key, node)
        return None
    send = w.sends.pop(key, None)
    if send is None:
        return None
    return Finding(w.mod.path, send.lineno, send.col_offset, w.mod.text(send), "dist.send()", w.mod.path,
                   node.lineno, w.mod.text(node), "p2p", value.rank.kind, why(value.rank, w.mod.path), fixes.p2p_order(),
                   [(w.mod.path, send.lineno, w.mod.text(send))], rule=P2P_RULE)


def group_of(node: ast.Call, args: list, kwargs: dict, first: bool = False) -> tuple:
    """The process group a collective is issued on: its value and its source (`first`: a call of
    the program's, whose first argument may be the group it passes on)."""
    for k in node.keywords:
        if k.arg in ("group", "process_group", "pg"):
            return kwargs[k.arg], k.value
    for a, v in zip(node.args[0 if first else 1:], args[0 if first else 1:]):
        if v.typ == "group":
            return v, a
    return CLEAN, None


def why(origin: Origin, here: str) -> str:
    """Where a per-rank value comes from: its line, and its file when that is not the finding's."""
    if origin.path == here:
        return f"{origin.text}, line {origin.line}"
    return f"{origin.text}, {os.path.basename(origin.path)}:{origin.line}"