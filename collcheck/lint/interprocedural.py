"""The whole program at once: which of the user's functions issue collectives (and through which
calls), what they return, what their parameters receive at their call sites, what `self.x` and
module globals hold. Each function is walked twice a round, until nothing changes:

- with its parameters as placeholders, for what it returns in terms of them (a call's result is
  then its return with the caller's arguments put in: `is_main(rank)` is rank-valued, `loss_of(x)`
  only when `x` is), and for the first collective it issues;
- with its parameters as its callers pass them (`def train(rank)` called with `dist.get_rank()`;
  `mp.spawn(worker)` passes a rank first), for the findings.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from ..knowledge import fixes
from .calls import Issued, _forward, program_function
from .expressions import Evaluator, named
from .flow import Walker
from .syntax import dotted
from .values import CLEAN, LOCAL, RANK, Origin, Val, combine, join
from .vocabulary import Api

MAX_ROUNDS = 6


class Lint:
    def __init__(self, program, learned=None, libraries=None):
        self.program = program
        self.learned = learned
        self.libraries = libraries  # libraries.Libraries: installed packages read on demand (None: not read)
        self.returns: dict[str, Val] = {}
        self.issues: dict[str, tuple] = {}  # function key -> (Issued, node) of its first collective
        self.issue_when: dict[str, frozenset] = {}  # function key -> (parameter, truthy): issues only then
        self.synced: dict[str, set[int]] = {}  # function key -> parameters it makes alike on every rank in place
        self.params_in: dict[str, dict[int, Val]] = {}
        self.attrs: dict[tuple, Val] = {}
        self.globals: dict[str, dict[str, Val]] = {}
        self.rank_only: set[str] = set()
        self.too_deep: set[str] = set()
        self.param_calls: dict[str, dict[int, ast.Call]] = {}  # parameters each function calls as a module
        self.rank_attrs: dict[str, Origin] = {}  # attributes the program sets from a rank (`args.is_master`)
        self.envs: dict[str, dict] = {}  # each function's environment at its end, for its closures
        self.changed_tokens: set = set()  # what changed this round (see read)
        self.readers: dict[tuple, dict] = {}  # token -> {function whose walk read it: the version it read}
        self.versions: dict[tuple, int] = {}  # token -> how many times it changed
        self.walking = ""
        self.walks = 0  # walks so far (a store replaces what the same function stored in an earlier walk)
        self.stored: dict[tuple, dict] = {}  # (token, key) -> {function: (walk, value it stored)}
        self.own: set = set()
        self.callers: set[str] = set()  # functions the program calls (their parameters' values are known)
        self.actual = False  # walking with the callers' arguments (else with placeholders)
        self.probes: dict[str, frozenset[int]] = {}  # path -> lines whose calls' guards are wanted
        self.probed: dict[tuple[str, int], tuple] = {}  # (path, line) -> the guards around a call there

    def run(self) -> list:
        """Walk every function, then again only those that read a summary, argument, attribute
        or global that changed, until none did (at most MAX_ROUNDS)."""
        todo = self._callees_first()
        findings: dict[str, list] = {}
        for _ in range(MAX_ROUNDS):
            self.changed_tokens = set()
            for key in todo:
                if key in self.too_deep:
                    continue
                try:
                    findings[key] = self._walk(key)
                except RecursionError:  # an expression nested thousands deep (generated code)
                    self.too_deep.add(key)
                    findings.pop(key, None)
                    self.program.skipped.append(f"{key}: nested too deeply to follow")
            if not self.changed_tokens:
                break
            dirty = {k for t in self.changed_tokens for k, seen in self.readers.get(t, {}).items()
                     if seen < self.versions[t]}  # read before the last change
            todo = [k for k in todo if k in dirty] + sorted(dirty.difference(todo))
        unique = {f.key(): f for fs in findings.values() for f in fs}
        return sorted(unique.values(), key=lambda f: (f.path, f.line, f.branch_line))

    def _callees_first(self) -> list[str]:
        """Module bodies (their globals) first, then functions module by module, a module after
        those it imports, each module's in the order they are defined: helpers usually come before
        their callers, so most summaries are final when their callers read them, and the next
        rounds re-walk few."""
        prog = self.program
        by_path = {m.path: m for m in prog.modules}
        names = {}
        for m in prog.modules:
            names.setdefault(m.name, m.path)
        order, seen = [], set()
        for m in prog.modules:
            stack = [(m.path, iter(_imported_paths(m, names)))]
            if m.path in seen:
                continue
            seen.add(m.path)
            while stack:
                path, deps = stack[-1]
                nxt = next((d for d in deps if d not in seen), None)
                if nxt is None:
                    stack.pop()
                    order.append(path)
                else:
                    seen.add(nxt)
                    stack.append((nxt, iter(_imported_paths(by_path[nxt], names))))
        rank = {path: i for i, path in enumerate(order)}
        funcs = prog.functions.values()
        modules = [f.key for f in funcs if isinstance(f.node, ast.Module)]
        rest = sorted((f for f in funcs if not isinstance(f.node, ast.Module)),
                      key=lambda f: (rank[f.module.path], f.node.lineno))
        return sorted(modules, key=lambda k: rank[k.rpartition(":")[0]]) + [f.key for f in rest]

    def read(self, token: tuple) -> None:
        """The function being walked depends on `token` (a summary, an attribute, a module's globals)."""
        self.readers.setdefault(token, {})[self.walking] = self.versions.get(token, 0)

    def _change(self, token: tuple) -> None:
        self.changed_tokens.add(token)
        self.own.add(token)
        self.versions[token] = self.versions.get(token, 0) + 1

    def _walk(self, key: str) -> list:
        fn = self.program.functions[key]
        self.walking = key
        self.walks += 1
        self.own = set()  # tokens this walk changes: it saw its own writes
        self.read(("in", key))
        actual = self.params_in.get(key)
        # without arguments that differ per rank, the placeholder walk is also the findings walk
        self.actual = not actual
        w = Walker(self, fn, report=not actual, summary=True)
        w.run({i: Val(params=frozenset((i,))) for i in range(len(fn.params))})
        self._summarise(key, w)
        if actual:
            self.actual = True
            w = Walker(self, fn, report=True, summary=False)
            w.run(actual)
        if key in self.program.parents and self.envs.get(key) != w.env:
            self.envs[key] = w.env
            self._change(("env", key))
        for token in self.own:
            if key in self.readers.get(token, ()):
                self.readers[token][key] = self.versions[token]
        return w.findings

    def _summarise(self, key: str, w: Walker) -> None:
        ret = w.returns if w.returns.members is None else replace(w.returns, members=None)
        if self.returns.get(key, CLEAN) != ret:
            self.returns[key] = ret
            self._change(("fn", key))
        for i, call in w.param_calls.items():
            if i not in self.param_calls.setdefault(key, {}):
                self.param_calls[key][i] = call
                self._change(("fn", key))
        if w.first is not None and key not in self.issues:
            self.issues[key] = w.first
            self._change(("fn", key))
        when = w.when or frozenset()
        if self.issue_when.get(key, frozenset()) != when:
            self.issue_when[key] = when
            self._change(("fn", key))
        node = w.fn.node
        if not isinstance(node, ast.Module) and w._rank_only(node) is not None and key not in self.rank_only:
            self.rank_only.add(key)
            self._change(("fn", key))

    # -- what the walker asks ------------------------------------------------------------------
    def class_attr(self, cls: str, attr: str) -> Val:
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            self.read(("attr", cls, attr))
            v = self.attrs.get((cls, attr))
            if v is not None:
                return v
            bases = [k for b in self.program.classes.get(cls, ()) for k in self.program.class_names.get(b.rpartition(".")[2], ())]
            cls = bases[0] if bases else None
        return CLEAN

    def set_class_attr(self, cls: str, attr: str, v: Val) -> None:
        self._store(self.attrs, (cls, attr), v, ("attr", cls, attr))

    def set_rank_attr(self, attr: str, origin: Origin) -> None:
        if attr not in self.rank_attrs:
            self.rank_attrs[attr] = origin
            self._change(("rank_attr", attr))

    def rank_attr(self, attr: str) -> Origin | None:
        self.read(("rank_attr", attr))
        return self.rank_attrs.get(attr)

    def closure_env(self, key: str) -> dict:
        self.read(("env", key))
        return self.envs.get(key, {})

    def globals_of(self, mod) -> dict:
        self.read(("global", mod.path))
        return self.globals.get(mod.path, {})

    def set_global(self, mod, name: str, v: Val) -> None:
        self._store(self.globals.setdefault(mod.path, {}), name, v, ("global", mod.path))

    def _store(self, table: dict, key, v: Val, token: tuple) -> None:
        """An attribute or a global: kept when it is a rank (or a module, a type), not when it is
        merely this rank's data (`self.loss = loss`): the branch on it is the step's, seen there."""
        v = Val(rank=v.rank, wrapped=v.wrapped, typ=v.typ, members=v.members, chosen=v.chosen)
        writers = self.stored.setdefault((token, key), {})  # each function's stores, from its last walk
        walk, seen = writers.get(self.walking, (None, None))
        writers[self.walking] = (self.walks, v if walk != self.walks else join(seen, v))
        old = table.get(key)
        new = join(*(w for _, w in writers.values()))
        if new != old:
            table[key] = new
            self._change(token)

    def _params(self, key: str, node: ast.Call, args: list, kwargs: dict) -> dict[int, Val]:
        """The callee's parameters (by index) this call's arguments go to."""
        fn = self.program.functions[key]
        bound = isinstance(node.func, ast.Attribute) or fn.name == "__init__"
        offset = 1 if fn.cls and fn.params[:1] in (["self"], ["cls"]) and bound else 0
        params = {i + offset: a for i, a in enumerate(args) if i + offset < len(fn.params)
                  and not isinstance(node.args[i], ast.Starred)}
        for k, v in kwargs.items():
            if k in fn.params:
                params[fn.params.index(k)] = v
        return params

    def called(self, key: str) -> bool:
        """Whether the program calls this function anywhere (so far)."""
        self.read(("called", key))
        return key in self.callers

    def call_result(self, ev: Evaluator, key: str, node: ast.Call, args: list, kwargs: dict) -> Val:
        fn = self.program.functions[key]
        self.read(("fn", key))
        if key not in self.callers:
            self.callers.add(key)
            self._change(("called", key))
        params = self._params(key, node, args, kwargs)
        if self.actual:
            self._record_args(key, params)
        if fn.name == "__init__":
            return Val(typ=fn.cls)
        return _instantiated(self.returns.get(key, CLEAN), params)

    def note_synced(self, key: str, param: int) -> None:
        """`key` passes its parameter to an in-place collective (broadcast) on every rank."""
        if param not in self.synced.setdefault(key, set()):
            self.synced[key].add(param)
            self._change(("fn", key))

    def synced_args(self, key: str, node: ast.Call) -> list[str]:
        """The names this call passes to parameters the callee makes alike in place."""
        self.read(("fn", key))
        params = self.synced.get(key)
        if not params:
            return []
        given = self._arg_nodes(self.program.functions[key], node)
        return [name for i in params if i in given and (name := dotted(given[i])) is not None
                and any(given[i] is a for a in [*node.args, *(k.value for k in node.keywords)])]

    def _record_args(self, key: str, params: dict) -> None:
        got = self.params_in.setdefault(key, {})
        for i, v in params.items():
            v = Val(v.rank, v.local, chosen=v.chosen)
            if v.varies:
                new = join(got.get(i, CLEAN), v)
                if new != got.get(i):
                    got[i] = new
                    self._change(("in", key))

    def spawned(self, node: ast.Call, ev: Evaluator) -> None:
        """`mp.spawn(worker, ...)`: worker's first parameter is the process's rank."""
        if not node.args:
            return
        key = program_function(ev, ast.Call(func=node.args[0], args=[], keywords=[]), dotted(node.args[0]))
        if key is not None:
            origin = Origin(RANK, ev.mod.path, node.lineno, ev.mod.text(node))
            self._record_args(key, {0: Val(rank=origin)})

    def issued_by(self, ev: Evaluator, key: str, node: ast.Call, passed) -> Issued | None:
        """What calling the program's function `key` issues: its first collective, or the forward
        of a wrapped model this call passes to a parameter the function calls (`evaluate(model)`)."""
        self.read(("fn", key))
        if key in self.rank_only:
            return None
        fn = self.program.functions[key]
        if key in self.issues and self._skipped_by_flags(key, node):
            return None  # `summarize(x, sync=False)`: its collectives run only when `sync` is set
        if key in self.issues:
            inner, inner_node = self.issues[key]
            site = (fn.module.path, inner_node.lineno, fn.module.text(inner_node))
            return Issued(replace(inner.api), (site, *inner.chain), wrapped=inner.wrapped, maybe=inner.maybe)
        calls = self.param_calls.get(key)
        if not calls:
            return None
        for i, arg in self._params(key, node, *passed).items():
            if i not in calls:
                continue
            if arg.wrapped:
                site = (fn.module.path, calls[i].lineno, fn.module.text(calls[i]))
                forward = _forward(arg.wrapped)
                return Issued(forward.api, (site,), wrapped=True, maybe=forward.maybe)
            if arg.params and ev.scope.summary:
                ev.scope.param_calls.setdefault(min(arg.params), node)  # passed on: the caller's parameter, called
        return None

    def _skipped_by_flags(self, key: str, node: ast.Call) -> bool:
        """Whether this call passes (or leaves at its default) a constant that keeps the callee's
        every collective from running (a flag parameter the callee tests: issue_when)."""
        when = self.issue_when.get(key)
        if not when:
            return False
        fn = self.program.functions[key]
        passed = self._arg_nodes(fn, node)
        for i, truthy in when:
            arg = passed.get(i)
            if isinstance(arg, ast.Constant) and bool(arg.value) != truthy:
                return True
        return False

    @staticmethod
    def _arg_nodes(fn, node: ast.Call) -> dict[int, ast.AST]:
        """The callee's parameters (by index) and the expressions this call gives them, its defaults
        where it gives none."""
        out: dict[int, ast.AST] = {}
        a = getattr(fn.node, "args", None)
        if a is not None:
            positional = a.posonlyargs + a.args
            for i, d in zip(range(len(positional) - len(a.defaults), len(positional)), a.defaults, strict=True):
                out[i] = d
            for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
                if d is not None:
                    out[fn.params.index(p.arg)] = d
        bound = isinstance(node.func, ast.Attribute) or fn.name == "__init__"
        offset = 1 if fn.cls and fn.params[:1] in (["self"], ["cls"]) and bound else 0
        for i, arg in enumerate(node.args):
            if isinstance(arg, ast.Starred):
                break
            out[i + offset] = arg
        for k in node.keywords:
            if k.arg in fn.params:
                out[fn.params.index(k.arg)] = k.value
        return out

    def probe(self, path: str, node: ast.Call, guards: list) -> None:
        """A call on a probed line (analysis/source.py asks which conditions enclose a recorded
        call): the guards around it, as the findings walk sees them (its last walk's)."""
        lines = self.probes.get(path)
        if lines:
            for line in range(node.lineno, (getattr(node, "end_lineno", None) or node.lineno) + 1):
                if line in lines:
                    self.probed[(path, line)] = tuple(guards)

    def library_call(self, name: str | None) -> Issued | None:
        """What calling an installed package's function issues, from its source (libraries.py)."""
        if self.libraries is None:
            return None
        found = self.libraries.function(name)
        if found is None:
            return None
        api, sometimes, chain = found
        package = name.partition(".")[0]
        return Issued(Api(api, fixes.call_on_every_rank(f"{name.rpartition('.')[2]}()"), package, sometimes=sometimes),
                      chain)

    def library_class(self, name: str | None) -> str | None:
        """'lib:<qualified name>' when `name` is an installed package's class (its methods followed)."""
        if self.libraries is None:
            return None
        found = self.libraries.class_of(name)
        return None if found is None else f"lib:{found}"

    def learned_call(self, mod, node: ast.Call, name: str | None) -> Issued | None:
        if self.learned is None:
            return None
        return self.learned.issued(mod, node, name)


def _instantiated(ret: Val, params: dict) -> Val:
    """A function's return with a call's arguments put in for its parameters."""
    inner = [params[i] for i in ret.params if i in params]
    out = combine(Val(ret.rank, ret.local), *inner)
    if ret.formatted and out.rank is not None:  # a name formatted from the caller's rank
        out = named(out, Origin(LOCAL, out.rank.path, out.rank.line, f"a name made from {out.rank.text}"))
    if (ret.chosen or any(v.chosen for v in inner)) and out.rank is not None:
        out = replace(out, chosen=True)
    if ret.sized and out.varies:  # its length does not depend on the arguments: as many items everywhere
        out = replace(out, sized=True)
    if ret.wrapped or ret.typ:
        out = replace(out, wrapped=ret.wrapped, typ=ret.typ, members=ret.members if ret.typ == "group" else None)
    if ret.items is not None:
        out = replace(out, items=tuple(_instantiated(i, params) for i in ret.items))
    return out


def _imported_paths(mod, names: dict) -> list[str]:
    """The linted modules `mod` imports (by dotted name or a tail of it)."""
    out = []
    for full in mod.imports.values():
        parts = full.split(".")
        for i in range(len(parts), 0, -1):
            path = names.get(".".join(parts[:i]))
            if path is not None and path != mod.path:
                out.append(path)
                break
    return out
