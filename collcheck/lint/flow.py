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
from dataclasses import replace

from . import binding, doubts, returns, truths
from . import vocabulary as V
from .arguments import ROOTS, group_of, p2p_order, root_finding, shape_finding, why
from .calls import Issued
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
from .expressions import Evaluator, mesh_dim_of
from .findings import (
    BARRIERS,
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
        self.sends: dict[str, ast.Call] = {}  # blocking sends on every rank, by peer, awaiting a receive
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

    def assign(self, target, v: Val, value_node) -> None:
        binding.assign(self, target, v, value_node)

    def bind(self, target, v: Val, source: ast.AST | None = None) -> None:
        binding.bind(self, target, v, source)

    def atom_kind(self, node) -> str | None:
        return binding.atom_kind(self, node)

    # -- collectives ---------------------------------------------------------------------------
    def collective(self, node: ast.Call, issued: Issued, args: list, kwargs: dict) -> None:
        if issued.p2p:
            if self.report:
                found = p2p_order(self, node, issued.api.name, args, kwargs)
                if found is not None:
                    self.findings.append(found)
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
            for rule in (root_finding, shape_finding):
                found = rule(self, node, issued, args, kwargs)
                if found is not None:
                    self.findings.append(found)
        if not self.report or not self.guards:
            return
        if issued.wrapped and self.joined:
            return  # join() shadows the forward/backward collectives of ranks that ran out of data
        guard = next((g for g in reversed(self.guards) if g.kind in (RANK, LOCAL)), None)
        if guard is None or node.lineno in self.mod.ignored or guard.line in self.mod.ignored:
            return
        if issued.maybe and guard.how in ("loop", "while"):
            return  # DDP's forward in a loop of per-rank length: its backward is the finding
        group, group_node = group_of(node, args, kwargs, first=bool(issued.chain))
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
            guard.text, guard.how, guard.kind, why(guard.origin, self.mod.path), fix, [here, *issued.chain], api.framework,
            maybe=issued.maybe, sometimes=api.sometimes, doubt=guard.doubt))

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
        if cond.rank is not None and not rpc and self.lint.program.uses_rpc():
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
            binding.set_per_rank(self, guard, start)
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
            binding.set_per_rank(self, guard, writes)
        same = guard is not None and body_issued == else_issued
        inner = body_findings + else_findings
        if guard is not None and guard.kind == RANK and node is not None and inner and not same and \
                agree(node, self.atom_kind, self.issued_at):
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

def _negates(a: ast.AST, b: ast.AST) -> bool:
    """Whether one test is the other negated (`not x` and `x`)."""
    def neg(x, y):
        return isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.Not) and alike(x.operand, y)
    return neg(a, b) or neg(b, a)


def _joined(envs: list[dict]) -> dict:
    out: dict = {}
    for env in envs:
        for k, v in env.items():
            out[k] = join(out[k], v) if k in out else v
    return out
