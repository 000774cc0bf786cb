"""One function's statements in order: the environment of values, the per-rank conditions the
current statement is under, and a finding for each call that issues collectives under one.

Control dependence, the way PARCOACH puts it for MPI: a call is under a condition when it is in
the branch of an `if`/`while`/`match` on a per-rank value, in a loop whose iterable differs per
rank, after an early exit (`return`, `break`, `continue`, `raise`) some ranks take, or in a
function decorated to run on some ranks only. Intended one-rank code stays quiet: point-to-point
calls, both branches issuing the same collectives, a collective on a group made of exactly the
ranks the condition lets through, and lines marked `# collcheck: ignore[rank-branch]`.
"""

from __future__ import annotations

import ast
import contextlib
import re
from dataclasses import replace

from ..knowledge import fixes
from . import doubts, returns, truths
from . import vocabulary as V
from .conditions import (
    data_like,
    enumerate_index,
    exits,
    handle_members,
    indexed_by,
    is_join,
    local_count,
    members,
    unwrapped,
)
from .expressions import Evaluator, Issued, mesh_dim_of
from .findings import (
    BARRIERS,
    ROOT_RULE,
    SHAPE_RULE,
    Finding,
    Guard,
    complementary,
    local_fix,
)
from .syntax import alike, dotted, predicate_key
from .values import CLEAN, LOCAL, RANK, Origin, Val, combine, join
from .worlds import agree


class Walker:
    """One function's statements, walked once: its environment, the guards around each statement,
    the findings and the summary its callers read. Expressions are its evaluator's (`ev`)."""

    def __init__(self, lint, fn, report: bool, summary: bool):
        self.lint, self.fn, self.mod, self.report, self.summary = lint, fn, fn.module, report, summary
        self.ev = Evaluator(lint, fn, self)
        self.value, self.origin = self.ev.value, self.ev.origin  # (read on every statement)
        self.env: dict[str, Val] = {}
        self.guards: list[Guard] = []
        self.joined = 0  # inside `with model.join():`
        self.findings: list[Finding] = []
        self.issued: list[str] = []  # the names of what this block issued, in order (both-branches check)
        self.writes: list[str] = []  # every name bound, in order (what a rank branch set)
        self.returns = CLEAN
        self.first: tuple | None = None  # (Issued, node): the first collective this function issues
        self.flags: list[tuple[int, bool]] = []  # (parameter, truthy) of the `if flag:` around this statement
        self.when: frozenset | None = None  # the flags every collective of the function is under
        self.barriers: list[tuple] = []  # (guard, line) of each barrier found under a rank branch
        self.param_calls: dict[int, ast.Call] = {}  # parameters called as modules (`model(x)`): the first call
        self.returned: list[tuple] = []  # (value, the rank guard around it, its expression) of each `return`
        self.known: list[tuple] = []  # (ast.dump of a uniform test, its truth value) of the `if`s around
        self.issued_at: dict[tuple, str] = {}  # (line, column) of each call that issues collectives -> what
        self.roots: set = set()  # constant roots of the broadcasts issued so far on every rank
        self.exact: set[str] = set()  # names bound to the rank number itself (`me = dist.get_rank()`)
        self.rpc = ""  # the RPC call a rank dispatch around here starts work with (guards' doubt)

    # -- entry ---------------------------------------------------------------------------------
    def run(self, params: dict[int, Val]) -> None:
        node = self.fn.node
        typed = self._annotated_classes(node)
        steps = self.fn.name in V.STEP_FUNCTIONS and self.fn.params[:1] != ["ctx"]  # not autograd.Function's
        # no call in the program: a parameter's name is all there is
        entry = not self.lint.called(self.fn.key) and self.fn.name not in self.lint.program.called_names()
        for i, p in enumerate(self.fn.params):
            v = params.get(i, CLEAN)
            if p in V.RANK_PARAMS and entry:
                v = join(v, Val(rank=Origin(RANK, self.mod.path, node.lineno, f"parameter `{p}`")))
            elif steps and p not in V.STEP_COUNTERS and (i > 0 or not self.fn.cls):
                v = join(v, Val(local=Origin(LOCAL, self.mod.path, node.lineno, f"`{p}` of `{self.fn.name}`")))
            if p in typed:
                v = join(v, Val(typ=typed[p]))
            self.env[p] = v
        if isinstance(node, ast.Module):
            self.block(node.body)
            return
        deco = self._rank_only(node)
        if deco is not None:
            self.guards.append(deco)
        self.block(node.body)
        self._pair_barriers()
        self.returns = returns.returned(self.returned)

    def _pair_barriers(self) -> None:
        """Drop barriers under complementary conditions (each rank reaches one of the two), and a
        DDP forward under a condition that also skips a collective for sure (its backward)."""
        paired = {line for g, line in self.barriers for h, _ in self.barriers
                  if g.line != h.line and complementary(g.test, h.test)}
        sure = {f.branch_line for f in self.findings if not f.maybe}
        self.findings = [f for f in self.findings if f.line not in paired and not (f.maybe and f.branch_line in sure)]

    def _annotated_classes(self, node) -> dict:
        """Parameters annotated with one of the program's classes (`trainer: Trainer`)."""
        if isinstance(node, ast.Module):
            return {}
        a = node.args
        out = {}
        for p in a.posonlyargs + a.args + a.kwonlyargs:
            if p.annotation is not None:
                key = self.lint.program.resolve(self.mod, dotted(p.annotation) or "")
                if key in self.lint.program.classes:
                    out[p.arg] = key
        return out

    def _rank_only(self, node) -> Guard | None:
        for d in node.decorator_list:
            target = d.func if isinstance(d, ast.Call) else d
            name = (dotted(target) or "").rpartition(".")[2]
            if name in V.RANK_ONLY_DECORATORS:
                text = "@" + self.mod.text(d)
                return Guard(RANK, self.mod.path, d.lineno, text, "decorator", Origin(RANK, self.mod.path, d.lineno, text))
        return None

    # -- collectives ---------------------------------------------------------------------------
    def collective(self, node: ast.Call, issued: Issued, args: list, kwargs: dict) -> None:
        if issued.p2p:
            return
        self.issued.append(issued.api.name)
        self.issued_at[(node.lineno, node.col_offset)] = issued.api.name
        if not self.guards:
            self.roots |= returns.constant_root(node, issued.api.name, ROOTS)
        if self.first is None:
            self.first = (issued, node)
        flags = frozenset(self.flags)
        self.when = flags if self.when is None else self.when & flags
        if self.report and not self.guards and not issued.chain:
            self._root(node, issued, args, kwargs)
            self._shapes(node, issued, args, kwargs)
        if not self.report or not self.guards:
            return
        if issued.wrapped and self.joined:
            return  # join() shadows the forward/backward collectives of ranks that ran out of data
        guard = next((g for g in reversed(self.guards) if g.kind in (RANK, LOCAL)), None)
        if guard is None or node.lineno in self.mod.ignored or guard.line in self.mod.ignored:
            return
        if issued.maybe and guard.how in ("loop", "while"):
            return  # DDP's forward in a loop of per-rank length: its backward is the finding
        group, group_node = _group(node, args, kwargs, first=bool(issued.chain))
        if guard.members is not None and guard.members in (group.members, indexed_by(group_node)):
            return  # a collective of the very group the condition selects (`groups[pair]` under `rank in pair`)
        if group.rank is not None:
            return  # a group chosen per rank: the condition may select exactly its members
        if guard.mesh_dim and (group.members or "").startswith("mesh-dim:") and group.members[9:] != guard.mesh_dim:
            return  # a coordinate along one mesh dimension, a group along another: its members share the coordinate
        api = issued.api
        fix = api.fix if guard.kind == RANK else local_fix(guard, api.fix)
        here = (self.mod.path, node.lineno, self.mod.text(node))
        if api.name in BARRIERS and guard.how == "branch" and guard.test is not None:
            self.barriers.append((guard, node.lineno))
        self.findings.append(Finding(
            self.mod.path, node.lineno, node.col_offset, self.mod.text(node), api.name, guard.path, guard.line,
            guard.text, guard.how, guard.kind, _why(guard.origin), fix, [here, *issued.chain], api.framework,
            maybe=issued.maybe, sometimes=api.sometimes, doubt=guard.doubt))

    def _root(self, node: ast.Call, issued: Issued, args: list, kwargs: dict) -> None:
        """A rooted collective (broadcast, reduce, gather, scatter and their object forms) whose root
        each rank takes from its own rank or data: the ranks name different roots."""
        at = ROOTS.get(issued.api.name)
        if at is None or node.lineno in self.mod.ignored:
            return
        keyword, position = at
        value, arg = None, None
        for k in node.keywords:
            if k.arg in (keyword, f"group_{keyword}"):
                value, arg = kwargs.get(k.arg), k.value
        if arg is None and position < len(node.args) and not isinstance(node.args[position], ast.Starred):
            value, arg = args[position], node.args[position]
        origin = value.origin if value is not None else None
        if origin is None:
            return
        group, _ = _group(node, args, kwargs)
        if group.rank is not None:
            return  # a group chosen per rank: the root may be chosen with it (each group's own first rank)
        subgroup = group is not CLEAN or any(k.arg in ("group", "process_group", "pg") for k in node.keywords)
        self.findings.append(Finding(
            self.mod.path, node.lineno, node.col_offset, self.mod.text(node), issued.api.name, self.mod.path,
            arg.lineno, self.mod.text(arg), "root", origin.kind, _why(origin), fixes.same_root(keyword),
            [(self.mod.path, node.lineno, self.mod.text(node))], issued.api.framework, rule=ROOT_RULE,
            subgroup=subgroup))

    def _shapes(self, node: ast.Call, issued: Issued, args: list, kwargs: dict) -> None:
        """A collective of a tensor whose shape may differ per rank (rank-shape), or an all-to-all whose
        output split sizes this rank computed alone instead of receiving them (always warnings)."""
        if node.lineno in self.mod.ignored:
            return
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
            return
        how, arg, origin = found
        self.findings.append(Finding(
            self.mod.path, node.lineno, node.col_offset, self.mod.text(node), api, self.mod.path, arg.lineno,
            self.mod.text(arg), how, origin.kind, _why(origin), fixes.same_shape(how == "splits"),
            [(self.mod.path, node.lineno, self.mod.text(node))], issued.api.framework, rule=SHAPE_RULE))

    @contextlib.contextmanager
    def branch(self, node, cond: Val):
        """While the evaluator reads the two arms of a conditional expression: under its guard."""
        guard = self._guard(node, cond, "branch", node.test)
        if guard is not None:
            self.guards.append(guard)
        try:
            yield
        finally:
            if guard is not None:
                self.guards.pop()

    # -- statements ----------------------------------------------------------------------------
    def block(self, stmts: list) -> list:
        """Walk statements; returns the early-exit guards that escape the block ((guard, exit kind))."""
        pushed, escaping = 0, []
        for s in stmts:
            for guard, kinds in self.stmt(s):
                self.guards.append(guard)
                pushed += 1
                escaping.append((guard, kinds))
        if pushed:
            del self.guards[-pushed:]
        return escaping

    def stmt(self, s) -> list:
        method = getattr(self, "s_" + s.__class__.__name__, None)
        if method is not None:
            return method(s) or []
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.value(child)
        return []

    def s_FunctionDef(self, s):
        for d in s.decorator_list:
            self.value(d)
        self.env[s.name] = CLEAN

    s_AsyncFunctionDef = s_FunctionDef

    def s_ClassDef(self, s):
        self.env[s.name] = CLEAN

    def s_Assign(self, s):
        v = self.value(s.value)
        for t in s.targets:
            self.assign(t, v, s.value)

    def s_AnnAssign(self, s):
        if s.value is not None:
            self.assign(s.target, self.value(s.value), s.value)

    def s_AugAssign(self, s):
        v = self.value(s.value)
        self.assign(s.target, combine(self.value(s.target), v), s.value)

    def s_Return(self, s):
        v = self.value(s.value)
        guard = next((g for g in reversed(self.guards) if g.kind in (RANK, LOCAL)), None)
        if guard is not None and returns.root_keeps_own(guard, self.roots, self.value):
            v, guard = CLEAN, None  # the root returns its own copy, the others what it broadcast
        self.returned.append((v, guard, s.value))

    def s_If(self, s):
        cond = self.value(s.test)
        rpc = self.rpc
        if cond.rank is not None and not rpc:
            self.rpc = doubts.rpc_dispatch(self.lint, self.ev, s)
        try:
            guard = self._guard(s, cond, "branch", s.test)
            known = ([], []) if guard is not None else (truths.truths(s.test, True), truths.truths(s.test, False))
            return self._branches(guard, s.body, s.orelse, self._else_is_uniform(s), self._flag(s.test, guard),
                                  known, s)
        finally:
            self.rpc = rpc

    def _flag(self, test, guard) -> tuple[int, bool] | None:
        """`if sync:` / `if not sync:` on a parameter of the function (a uniform option): (its index,
        whether the body runs when it is truthy). The callers that pass it a constant know which arm runs."""
        if guard is not None:
            return None
        truthy = True
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, truthy = test.operand, False
        if isinstance(test, ast.Name) and test.id in self.fn.params:
            return self.fn.params.index(test.id), truthy
        return None

    def _else_is_uniform(self, s) -> bool:
        """`if not in_order and is_main: ... elif in_order: barrier()`: the elif's own test (uniform)
        excludes a uniform part of the per-rank condition, so every rank for which it holds fails
        the first test and enters the elif alike: it is not under the per-rank condition."""
        if not (len(s.orelse) == 1 and isinstance(s.orelse[0], ast.If)) or \
                not (isinstance(s.test, ast.BoolOp) and isinstance(s.test.op, ast.And)):
            return False
        inner = s.orelse[0].test
        if self.value(inner).varies:
            return False
        return any(not self.value(part).varies and _negates(part, inner) for part in s.test.values)

    def s_While(self, s):
        cond = self.value(s.test)
        guard = self._guard(s, cond, "while", s.test)
        escaping = self._loop(guard, s.body, lambda: None)
        escaping += self.block(s.orelse)
        return [(g, k) for g, k in escaping if "return" in k]

    def s_For(self, s):
        it = self.value(s.iter)
        elem = it.data_only()
        if data_like(s.iter):
            elem = join(elem, Val(local=Origin(LOCAL, self.mod.path, s.lineno, f"a batch of `{self.mod.text(s.iter, 40)}`")))
        counted = it if (it.rank or it.local and it.formatted) and not it.sized else local_count(s.iter, it)
        guard = self._guard(s, counted, "loop", None)
        if guard is not None and counted.opaque:
            guard = replace(guard, doubt=doubts.opaque(self.mod.text(s.iter, 40)))
        counter = enumerate_index(s)

        zipped = self._zipped(s)

        listed = self.value(unwrapped(s.iter))
        groups = listed if listed.typ == "group" else None  # a list of groups made alike: each keeps its members

        def bind_target():
            if zipped is not None:  # `for x, layout in zip(inputs, layouts)`: each its own
                for t, v in zipped:
                    self.assign(t, v, None)
            else:
                self.assign(s.target, elem, None)
            if groups is not None:
                target = s.target.elts[-1] if isinstance(s.target, ast.Tuple) and counter is not None else s.target
                self.assign(target, Val(elem.rank, elem.local, elem.params, typ="group", members=groups.members),
                            None)
            if counter is not None:
                self.bind(counter, CLEAN)  # `for i, batch in enumerate(loader)`: i counts alike everywhere

        escaping = self._loop(guard, s.body, bind_target)
        escaping += self.block(s.orelse)
        return [(g, k) for g, k in escaping if "return" in k]

    s_AsyncFor = s_For

    def _zipped(self, s):
        it, target = s.iter, s.target
        if not (isinstance(it, ast.Call) and dotted(it.func) == "zip" and isinstance(target, ast.Tuple)
                and len(target.elts) == len(it.args) and not it.keywords):
            return None
        out = []
        for t, a in zip(target.elts, it.args):
            v = self.value(a).data_only()
            if data_like(a):
                v = join(v, Val(local=Origin(LOCAL, self.mod.path, s.lineno, f"a batch of `{self.mod.text(a, 40)}`")))
            out.append((t, v))
        return out

    def _loop(self, guard, body: list, bind_target) -> list:
        """A loop body, walked again only when it changed what it starts from (values carried
        around the loop): nested loops stay linear, not 2^depth."""
        start = len(self.writes)
        bind_target()
        before = dict(self.env)
        escaping = self._under(guard, body)
        if any(self.env.get(k) is not v and self.env.get(k) != v for k, v in before.items()):
            # (a variable first set in the body is read in a later iteration only after it is set)
            bind_target()
            escaping = self._under(guard, body)
        if guard is not None and guard.kind == RANK:
            self._set_per_rank(guard, start)
        return escaping

    def s_With(self, s):
        joins = 0
        for item in s.items:
            v = self.value(item.context_expr)
            if is_join(item.context_expr, self.ev.resolve):
                joins += 1
            if item.optional_vars is not None:
                self.assign(item.optional_vars, v, None)
        self.joined += joins
        try:
            return self.block(s.body)
        finally:
            self.joined -= joins

    s_AsyncWith = s_With

    def s_Try(self, s):
        escaping = self.block(s.body)
        before = dict(self.env)
        envs = [dict(self.env)]
        for h in s.handlers:
            self.env = dict(before)
            if h.name:
                self.env[h.name] = CLEAN
            escaping += self.block(h.body)
            envs.append(self.env)
        self.env = _joined(envs)
        escaping += self.block(s.orelse)
        escaping += self.block(s.finalbody)
        return escaping

    s_TryStar = s_Try

    def s_Match(self, s):
        subject = self.value(s.subject)
        guard = self._guard(s, subject, "branch", s.subject)
        before, envs, escaping = dict(self.env), [], []
        for case in s.cases:
            self.env = dict(before)
            escaping += self._under(guard, case.body)
            envs.append(self.env)
        self.env = _joined(envs + [before])
        return escaping

    # -- conditions ----------------------------------------------------------------------------
    def _guard(self, s, cond: Val, how: str, test) -> Guard | None:
        if not cond.varies:
            return None
        kind = RANK if cond.rank else LOCAL
        header = self.mod.lines[s.lineno - 1].strip()
        text = header if len(header) <= 80 else header[:77] + "..."
        return Guard(kind, self.mod.path, s.lineno, text, how, cond.origin, self._members(test), test=test,
                     mesh_dim=mesh_dim_of(test, self.value) if test is not None else None,
                     doubt=doubts.rpc(self.rpc) if self.rpc and kind == RANK else cond.origin.doubt)

    def _members(self, test):
        """The ranks a condition lets through, as members_key gives a group's: a list (`rank in
        ranks`, `rank == 0`) or a predicate on the one rank variable it reads (`rank % 2 == parity`)."""
        if test is None:
            return None
        found = members(test) or handle_members(test, self.value)
        if found is not None:
            return found
        names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name) and self.value(n).rank is not None}
        return predicate_key(test, names.pop()) if len(names) == 1 else None

    def _under(self, guard: Guard | None, body: list, known: list = ()) -> list:
        if guard is not None:
            self.guards.append(guard)
        self.known.extend(known)
        try:
            return self.block(body)
        finally:
            del self.known[len(self.known) - len(known):]
            if guard is not None:
                self.guards.pop()

    def _branches(self, guard: Guard | None, body: list, orelse: list, uniform_else: bool = False,
                  flag: tuple[int, bool] | None = None, known: tuple = ((), ()), node=None) -> list:
        before, findings, issued, writes = dict(self.env), self.findings, self.issued, len(self.writes)
        self.findings, self.issued = [], []
        if flag is not None:
            self.flags.append(flag)
        escaping = self._under(guard, body, known[0])
        body_env, body_findings, body_issued = self.env, self.findings, self.issued
        self.env, self.findings, self.issued = dict(before), [], []
        else_guard = None if uniform_else else \
            guard and Guard(guard.kind, guard.path, guard.line, guard.text, "else", guard.origin, test=guard.test,
                            doubt=guard.doubt)
        if flag is not None:
            self.flags[-1] = (flag[0], not flag[1])
        escaping += self._under(else_guard, orelse, known[1])
        if flag is not None:
            self.flags.pop()
        else_findings, else_issued = self.findings, self.issued
        else_env = self.env
        self.env = _joined([body_env, else_env])
        if guard is None and isinstance(node, ast.If):
            truths.correlate(self.env, node.test, body_env, else_env)
        if guard is not None and guard.kind == RANK:
            self._set_per_rank(guard, writes)
        same = guard is not None and body_issued == else_issued
        inner = body_findings + else_findings
        if guard is not None and guard.kind == RANK and node is not None and inner and not same and \
                agree(node, self._atom_kind, self.issued_at):
            span = range(node.lineno, node.end_lineno + 1)  # ranks taking turns: every rank issues alike
            inner = [f for f in inner if not (f.branch_path == self.mod.path and f.branch_line in span)]
        self.findings = findings + [f for f in inner if not (same and f.branch_line == guard.line)]
        self.issued = issued + body_issued
        if guard is not None:
            kinds = exits(body) | exits(orelse)
            if kinds:
                doubt = doubts.exits(body, orelse) or guard.doubt
                test = guard.test if not exits(orelse) else None  # (past it: the ranks that failed the test)
                escaping.append((Guard(guard.kind, guard.path, guard.line, guard.text, "exit", guard.origin,
                                       test=test, doubt=doubt), kinds))
        return escaping

    def _atom_kind(self, node) -> str | None:
        """What a rank test reads (worlds.agree): "rank" (the rank number itself), "uniform", or
        None (a value derived from the rank, or this rank's data)."""
        if self._exact_rank(node):
            return "rank"
        if isinstance(node, ast.Call):
            return None
        return None if self.value(node).varies else "uniform"

    def _exact_rank(self, node) -> bool:
        """`dist.get_rank()`, `self.rank`, a name bound to one, a `rank` parameter: the rank number."""
        if isinstance(node, ast.Call):
            return self.ev.resolve(dotted(node.func)) in V.RANK_CALLS and not node.args and not node.keywords
        if isinstance(node, ast.Attribute) and node.attr in V.RANK_NUMBERS:
            return True
        name = dotted(node)
        return name in self.exact or name in V.RANK_PARAMS and name in self.fn.params and \
            self.value(node).rank is not None

    def _set_per_rank(self, guard: Guard, since: int) -> None:
        """After a rank branch (or a loop of per-rank count), what it set differs per rank: `if rank
        == 0: metrics["x"] = ...` then `for k in metrics`. Inside the branch it is just a value."""
        origin = guard.origin
        unless = truths.vacuous_when(guard.test, self.value) if guard.test is not None else None
        if unless is not None:
            origin = replace(origin, unless=origin.unless | {unless})  # `if not F or rank == 0:`: alike where F is false
        for name in set(self.writes[since:]):
            v = self.env.get(name, CLEAN)
            if v.rank is None:
                v = self.env[name] = join(v, Val(rank=origin, chosen=True))
                if name.startswith("self.") and name.count(".") == 1 and self.fn.cls:
                    self.lint.set_class_attr(self.fn.cls, name[5:], v)

    # -- assignment ----------------------------------------------------------------------------
    def assign(self, target, v: Val, value_node) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            elts = value_node.elts if isinstance(value_node, (ast.Tuple, ast.List)) and \
                len(value_node.elts) == len(target.elts) else None
            items = v.items if v.items is not None and len(v.items) == len(target.elts) and \
                not any(isinstance(t, ast.Starred) for t in target.elts) else None
            for i, t in enumerate(target.elts):
                if elts is not None:
                    part = self.value(elts[i])
                elif items is not None:  # `_, group, _ = init()`: each its own
                    part = items[i]
                elif i > 0 and v.typ == "engine":  # `engine, optimizer, ... = deepspeed.initialize(...)`
                    part = v.data_only()
                else:
                    part = v
                self.assign(t.value if isinstance(t, ast.Starred) else t, part, elts[i] if elts else None)
            return
        self.bind(target, v, value_node)

    def bind(self, target, v: Val, source: ast.AST | None = None) -> None:
        """`target = v`; `source`: the assigned expression, when there is one."""
        name = dotted(target)
        if isinstance(target, ast.Attribute) and v.rank and _flag_like(target.attr, source) \
                and not (isinstance(target.value, ast.Name) and target.value.id == "self"):
            self.lint.set_rank_attr(target.attr, v.rank)  # `args.is_master = rank == 0`: `.is_master` anywhere
        if isinstance(target, ast.Subscript):
            base = dotted(target.value)
            if base is not None:
                self.env[base] = join(self.ev.lookup(base), v.data_only())
                self.writes.append(base)
            return
        if name is None:
            return
        self.env[name] = v
        self.writes.append(name)
        if source is not None and v.rank is not None and self._exact_rank(source):
            self.exact.add(name)
        else:
            self.exact.discard(name)
        if name.startswith("self.") and name.count(".") == 1 and self.fn.cls:
            self.lint.set_class_attr(self.fn.cls, name[5:], v)
        if isinstance(self.fn.node, ast.Module):
            self.lint.set_global(self.mod, name, v)


def _negates(a: ast.AST, b: ast.AST) -> bool:
    """Whether one test is the other negated (`not x` and `x`)."""
    def neg(x, y):
        return isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.Not) and alike(x.operand, y)
    return neg(a, b) or neg(b, a)


# rooted collectives (by the name findings give them): the root's keyword and its position
ROOTS = {"dist.broadcast()": ("src", 1), "dist.reduce()": ("dst", 1), "dist.gather()": ("dst", 2),
         "dist.scatter()": ("src", 2), "dist.broadcast_object_list()": ("src", 1),
         "dist.scatter_object_list()": ("src", 2), "dist.gather_object()": ("dst", 2)}


def _group(node: ast.Call, args: list, kwargs: dict, first: bool = False) -> tuple:
    """The process group a collective is issued on: its value and its source (`first`: a call of
    the program's, whose first argument may be the group it passes on)."""
    for k in node.keywords:
        if k.arg in ("group", "process_group", "pg"):
            return kwargs[k.arg], k.value
    for a, v in zip(node.args[0 if first else 1:], args[0 if first else 1:]):
        if v.typ == "group":
            return v, a
    return CLEAN, None


def _why(origin: Origin) -> str:
    return f"{origin.text}, line {origin.line}"


def _joined(envs: list[dict]) -> dict:
    out: dict = {}
    for env in envs:
        for k, v in env.items():
            out[k] = join(out[k], v) if k in out else v
    return out


_FLAG_NAME = re.compile(r"rank|master|main|zero|chief|leader|primary|first|last", re.IGNORECASE)


def _flag_like(attr: str, source) -> bool:
    """An attribute worth following by its name alone, program-wide: a rank or a rank test
    (`args.is_master = rank == 0`), not any value that happens to mix a rank in (`p.grad = x * rank`)."""
    return bool(_FLAG_NAME.search(attr)) or isinstance(source, (ast.Compare, ast.BoolOp)) or \
        isinstance(source, ast.UnaryOp) and isinstance(source.op, ast.Not)
