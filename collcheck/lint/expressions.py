"""The value of an expression (values.Val) and what a call is: a collective, a framework call
that issues collectives, a call of the user's own function that does, or nothing of note.

An expression differs per rank when any part of it does; a few calls make their result the same
on every rank again (device placement, `isinstance`, a collective's result), and `is None`
tests and comparisons with -1 (`local_rank != -1`: "is this job distributed") are the same on
every rank whatever they test.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from . import calls, doubts, truths
from . import vocabulary as V
from .conditions import unwrapped
from .syntax import alike, dotted, imported_name, members_key
from .values import CLEAN, LOCAL, RANK, Origin, Val, combine, join

KNOWN_MODULES = frozenset({"torch", "numpy", "math", "itertools", "functools", "operator", "os", "sys", "random",
                           "collections", "builtins", "copy", "typing", "time", "re", "json"})
class Evaluator:
    """Expression values in one function's environment. A walker (flow.py) holds one and is its
    `scope`: the walker owns the environment the values are read from and written to (a walrus,
    a comprehension's target), binds names, and hears of each collective a call issues and of
    each conditional expression (a branch, for its guards)."""

    def __init__(self, lint, fn, scope):
        self.lint, self.fn, self.mod, self.scope = lint, fn, fn.module, scope

    @property
    def env(self) -> dict:
        return self.scope.env

    @env.setter
    def env(self, env: dict) -> None:
        self.scope.env = env

    # -- names ---------------------------------------------------------------------------------
    def resolve(self, name: str | None) -> str | None:
        return imported_name(self.mod, name)

    def origin(self, kind: str, node: ast.AST, text: str | None = None) -> Origin:
        return Origin(kind, self.mod.path, node.lineno, text or self.mod.text(node))

    def lookup(self, name: str) -> Val:
        v = self._lookup(name)
        if v.rank is not None and v.rank.unless and truths.settled(v.rank.unless, self.scope.known):
            return replace(v, rank=None)  # per rank only where a test this code runs under is otherwise
        return v

    def _lookup(self, name: str) -> Val:
        if name in self.env:
            return self.env[name]
        if self.fn.parent is not None and "." not in name:  # a closure's variable of the enclosing function
            outer = self.lint.closure_env(self.fn.parent)
            if name in outer:
                return outer[name]
        if name.startswith("self.") and self.fn.cls:
            attr = name[5:]
            if "." not in attr:
                return self.lint.class_attr(self.fn.cls, attr)
        return self.lint.globals_of(self.mod).get(name, CLEAN)

    # -- expressions ---------------------------------------------------------------------------
    def value(self, node: ast.AST | None) -> Val:
        if node is None:
            return CLEAN
        method = _DISPATCH.get(node.__class__)
        if method is None:
            method = _DISPATCH[node.__class__] = getattr(type(self), "v_" + node.__class__.__name__, _parts)
        return method(self, node)

    def v_Constant(self, node) -> Val:
        return CLEAN

    def v_BinOp(self, node) -> Val:
        return combine(self.value(node.left), self.value(node.right))

    def v_UnaryOp(self, node) -> Val:
        return combine(self.value(node.operand))

    def v_BoolOp(self, node) -> Val:
        return combine(*[self.value(v) for v in node.values])

    def v_Tuple(self, node) -> Val:
        vals = [self.value(e) for e in node.elts]
        out = combine(*vals)
        if any(v != CLEAN for v in vals) and not any(isinstance(e, ast.Starred) for e in node.elts):
            out = replace(out, items=tuple(vals))  # `return group, rank`: unpacked item by item
        return out

    v_List = v_Tuple

    def v_Set(self, node) -> Val:
        return combine(*[self.value(e) for e in node.elts])

    def v_JoinedStr(self, node) -> Val:
        out = combine(*[self.value(v.value) for v in node.values if v.__class__ is ast.FormattedValue])
        return named(out, self.origin(LOCAL, node, f"a name made from the rank: `{self.mod.text(node, 40)}`")) \
            if out != CLEAN else out

    def v_Starred(self, node) -> Val:
        return self.value(node.value)

    def v_Dict(self, node) -> Val:
        return combine(*[self.value(k) for k in node.keys if k is not None], *[self.value(v) for v in node.values])

    def v_Name(self, node) -> Val:
        return self.lookup(node.id)

    def v_Attribute(self, node) -> Val:
        if node.attr in V.RANK_ATTRS or node.attr in V.ARGS_RANK_ATTRS and \
                (dotted(node.value) or "").rpartition(".")[2] in V.ARGS_NAMES:
            self.value(node.value)
            return Val(rank=self.origin(RANK, node))
        learned = self.lint.rank_attr(node.attr)
        if learned is not None:
            self.value(node.value)
            return Val(rank=learned)
        name = dotted(node)
        if name is not None and (name in self.env or name.startswith("self.")):
            got = self.lookup(name)
            if got is not CLEAN or name in self.env:
                return got
        base = self.value(node.value)
        if base.wrapped and node.attr == "module":
            return CLEAN  # DDP's `model.module`: the plain module
        if node.attr in V.UNIFORM_PROPERTIES and not base.chosen:
            return CLEAN  # `shard.dtype`: this rank's part of a tensor has the whole's dtype
        return Val(base.rank, base.local, base.params, output_of=base.output_of) if base.varies or base.params or \
            base.output_of else CLEAN

    def v_Subscript(self, node) -> Val:
        env_name = self._environ(node)
        if env_name is not None:
            return env_name
        base = self.value(node.value)
        if base.typ == "mesh" and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return Val(typ=f"mesh:{node.slice.value}")  # `mesh["dp"]`: one dimension's submesh
        index = self.value(node.slice)
        if index.rank is not None and base.rank is None and base.typ is None and not isinstance(node.slice, ast.Slice):
            # `shards[rank]`: this rank's element of a list, its data (maybe alike), not its rank
            return Val(local=self.origin(LOCAL, node, f"this rank's element of `{self.mod.text(node.value, 30)}`"),
                       params=base.params)
        return combine(base, index)

    def _environ(self, node) -> Val | None:
        """`os.environ["RANK"]`, `os.environ.get("RANK")`, `os.getenv("RANK")`: a rank."""
        if isinstance(node, ast.Subscript):
            target, key = node.value, node.slice
            if not (isinstance(target, ast.Attribute) and target.attr == "environ"):
                return None
        elif isinstance(node, ast.Call) and node.args:
            target, key = node.func, node.args[0]
            if not (isinstance(target, ast.Attribute) and target.attr in ("get", "getenv")
                    or isinstance(target, ast.Name) and target.id in ("getenv", "get")):
                return None
        else:
            return None
        name = self.resolve(dotted(target))
        if name not in ("os.environ", "os.environ.get", "os.getenv"):
            return None
        if isinstance(key, ast.Constant) and key.value in V.RANK_ENV:
            return Val(rank=self.origin(RANK, node))
        return CLEAN

    def v_Compare(self, node) -> Val:
        parts = [self.value(node.left)] + [self.value(c) for c in node.comparators]
        if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
            # `x is None`: the same on every rank unless x was picked per rank (`a if rank == 0 else
            # None`, set in a rank branch), not when it is merely computed from the rank (a file name)
            rank = next((p.rank for p in parts if p.rank and p.chosen), None)
            return Val(rank=rank) if rank else CLEAN
        if all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            # `"labels" in inputs`: structure, the same on every rank unless it is a rank test
            rank = next((p.rank for p in parts if p.rank), None)
            return Val(rank=rank) if rank else CLEAN
        if len(parts) == 2 and all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops) and \
                all(p.rank and not p.local for p in parts):
            return Val(rank=replace(parts[0].rank, doubt=doubts.two_ranks(self.mod.text(node, 60))))
        if any(_is_minus_one(c) for c in [node.left] + node.comparators) and not any(p.local for p in parts):
            return CLEAN  # `local_rank != -1`: whether the job is distributed
        return combine(*parts)

    def v_IfExp(self, node) -> Val:
        cond = self.value(node.test)
        if alike(unwrapped(node.body), unwrapped(node.orelse)):  # `tqdm(loader) if rank == 0 else loader`
            return join(self.value(node.body), self.value(node.orelse))
        with self.scope.branch(node, cond):
            out = join(combine(cond), self.value(node.body), self.value(node.orelse))
        return replace(out, chosen=True) if cond.rank is not None else out

    def v_NamedExpr(self, node) -> Val:
        v = self.value(node.value)
        self.env[node.target.id] = v
        return v

    def v_Lambda(self, node) -> Val:
        return CLEAN

    def v_ListComp(self, node) -> Val:
        return self._comprehension(node, [node.elt])

    v_SetComp = v_GeneratorExp = v_ListComp

    def v_DictComp(self, node) -> Val:
        return self._comprehension(node, [node.key, node.value])

    def _comprehension(self, node, elts) -> Val:
        saved = dict(self.env)
        parts = []
        sized = not isinstance(node, ast.DictComp)  # (a dict's keys may collide per rank)
        for gen in node.generators:
            it = self.value(gen.iter)
            sized = sized and not gen.ifs and (it == CLEAN or it.sized)
            parts.append(it.data_only())
            self.scope.bind(gen.target, it.data_only())
            parts += [self.value(c).data_only() for c in gen.ifs]
        values = [self.value(e) for e in elts]
        self.env = saved
        out = combine(*parts, *values)
        if sized and (out.varies or out.params):  # `[f(rank, k) for k in range(3)]`: per-rank items, as many everywhere
            out = Val(out.rank, out.local, out.params, sized=True)
        if len(values) == 1 and values[0].typ == "group":  # `[dist.new_group(...) for ...]`: a list of groups
            return Val(out.rank, out.local, out.params, typ="group", members=values[0].members)
        return out

    # -- calls ---------------------------------------------------------------------------------
    def v_Call(self, node) -> Val:
        if self.lint.probes and self.scope.report:
            self.lint.probe(self.mod.path, node, self.scope.guards)
        func = node.func
        recv = self.value(func.value) if isinstance(func, ast.Attribute) else None
        fval = self.value(func) if not isinstance(func, ast.Attribute) else CLEAN
        args = [self.value(a) for a in node.args]
        kwargs = {k.arg: self.value(k.value) for k in node.keywords}
        name = self.resolve(dotted(func))
        if name in V.SPAWNERS:
            self.lint.spawned(node, self)
        key = calls.program_function(self, node, name, recv)
        issued = calls.classify(self, node, name, recv, fval, (args, kwargs), key)
        if issued is not None:
            self.scope.collective(node, issued, args, kwargs)
        if key is not None:
            for target in self.lint.synced_args(key, node):
                self.env[target] = CLEAN  # `broadcast_list(info)` of the program's own: info now rank 0's
        return self.result(node, name, recv, fval, args, kwargs, issued, key)

    def result(self, node, name, recv, fval, args, kwargs, issued, key) -> Val:
        """The call's value: a rank or data source, a uniform result, a wrapped module, a program
        function's return, or else a value computed from the receiver and arguments."""
        func = node.func
        meth = func.attr if isinstance(func, ast.Attribute) else (name or "").rpartition(".")[2]
        env = self._environ(node)
        if env is not None:
            return env
        if name in V.RANK_CALLS or (isinstance(func, ast.Attribute) and meth in V.RANK_METHODS):
            return Val(rank=self.origin(RANK, node))
        if meth in V.MEMBERSHIP:
            return CLEAN
        if meth in V.LOCAL_CALLS:
            return Val(local=self.origin(LOCAL, node))
        if name in V.WRAPPERS:
            kind = V.WRAPPERS[name]
            if kind in V.IN_PLACE_WRAPPERS and node.args:
                self.scope.bind(node.args[0], Val(wrapped=kind))
            return Val(wrapped=kind)
        if name in V.FRAMEWORK_TYPES:
            return Val(typ=V.FRAMEWORK_TYPES[name])
        if name in ("deepspeed.initialize",):
            return Val(wrapped="DeepSpeed", typ="engine")
        if isinstance(func, ast.Attribute) and meth == "prepare" and (recv.typ == "accelerator" or "accelerator" in (
                dotted(func.value) or "").lower()):
            return Val(wrapped="accelerate")
        if name in ("torch.distributed.new_group", "torch.distributed.distributed_c10d.new_group"):
            ranks = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "ranks"), None)
            return Val(members=members_key(ranks) if ranks is not None else None, typ="group")
        if (name or "").endswith(("init_device_mesh", "DeviceMesh")):
            return Val(typ="mesh")
        if isinstance(func, ast.Attribute) and meth == "get_group" and (recv.typ or "").startswith("mesh"):
            dim = _mesh_dim(node, recv)  # a mesh dimension's group: its members share every other coordinate
            return Val(typ="group", members=f"mesh-dim:{dim}" if dim else None)
        if issued is not None and issued.uniform_result:
            self._uniform_in_place(node, meth)
            return CLEAN  # a collective's result is the same on every rank
        shaped = self._shaped(node, func, meth, name, args, recv)
        if shaped is not None:
            return shaped
        if meth in V.EVEN_SHARDS:
            return Val(typ="sampler")  # every rank gets as many batches
        if name in V.UNIFORM_RESULT:
            return CLEAN
        if isinstance(func, ast.Attribute) and meth in V.UNIFORM_QUERIES and not (recv or CLEAN).chosen:
            return CLEAN  # `shard.is_floating_point()`: the dtype, alike on every rank's part
        if isinstance(func, ast.Attribute) and meth in V.UNIFORM_METHODS:
            return recv.data_only()  # `x.to(local_rank)`: x moved, as per-rank as it was
        if meth in V.PASS_THROUGH and node.args:
            return args[0].data_only()  # `tqdm(loader, disable=rank != 0)`: the loader's batches
        if (name or "").endswith("DataLoader") and any(v.typ == "sampler" for v in kwargs.values()):
            return CLEAN  # a DistributedSampler gives every rank as many batches
        cls = calls.program_class(self, node)
        if cls is not None:  # an instance of the program's own class: its methods can be followed
            if key is not None:
                self.lint.call_result(self, key, node, args, kwargs)
            return Val(typ=cls)
        if key is None and issued is None and name and "." in name:
            cls = self.lint.library_class(name)
            if cls is not None:  # an installed package's object: its methods, from the package's source
                return Val(typ=cls)
        if key is not None:
            return self.lint.call_result(self, key, node, args, kwargs)
        if fval.wrapped or (recv is not None and recv.wrapped and meth in ("forward", "__call__")):
            return Val(output_of=fval.wrapped or recv.wrapped)
        kept = [v for k, v in kwargs.items() if k not in V.DEVICE_KEYWORDS and k != "generator"]
        out = combine(recv or CLEAN, fval, *args, *kept)
        if out.rank is not None and self._unread(func, name):
            out = replace(out, opaque=True)
        seeded = kwargs.get("generator")
        if seeded is not None and (seeded.rank is not None or seeded.params):
            # numbers drawn from a generator seeded per rank (or by the caller): this rank's data, a
            # value rather than its rank (its shape is the arguments')
            return join(out, Val(local=self.origin(LOCAL, node, f"numbers drawn from `{self.mod.text(node, 40)}`")))
        return out

    def _uniform_in_place(self, node, meth: str) -> None:
        if meth in V.IN_PLACE_UNIFORM or meth in V.EXCHANGES:
            target = node.args[0] if node.args else \
                next((k.value for k in node.keywords if k.arg in V.IN_PLACE_KEYWORDS), None)
            name = dotted(target) if target is not None else None
            if name is not None:
                held = self.value(target).params
                self.env[name] = CLEAN
                index = self.fn.params.index(name) if name in self.fn.params else None
                if index in held and not self.scope.guards and self.scope.summary:
                    self.lint.note_synced(self.fn.key, index)  # the caller's object, made alike in place

    def _unread(self, func, name: str | None) -> bool:
        """A function imported from a module lint does not read (torch's own and the standard
        library's aside): what it returns, and how many items, is not known."""
        head = (dotted(func) or "").partition(".")[0]
        if not name or head not in self.mod.imports or name.partition(".")[0] in KNOWN_MODULES:
            return name is not None and name.startswith("torch.testing.")
        return True

    def _shaped(self, node, func, meth, name, args, recv) -> Val | None:
        """A tensor whose shape may differ per rank: `torch.bincount(labels)` of per-rank labels,
        `torch.zeros(n)` of a per-rank n (its values per rank too, as the arguments were)."""
        if meth in V.SHAPE_FROM_VALUES and (name or "").startswith("torch") or \
                meth in V.SHAPE_FROM_VALUES and isinstance(func, ast.Attribute) and recv is not None and recv.varies:
            source = [recv] if isinstance(func, ast.Attribute) and not (name or "").startswith("torch") else args[:1]
        elif meth in V.FACTORIES and (name or "").startswith("torch."):
            # the size arguments: `torch.full(size, fill)`'s first, `randint(low, high, size)`'s last, all of the others'
            sizes = [kw for k, kw in zip([k.arg for k in node.keywords], [self.value(k.value) for k in node.keywords])
                     if k == "size"]
            source = sizes or (args[:1] if meth == "full" else args[-1:] if meth == "randint" else args)
        else:
            return None
        varying = combine(*source)
        if not varying.varies:
            return None
        return Val(varying.rank, varying.local, varying.params, shaped=self.origin(varying.origin.kind, node))

def named(v: Val, origin: Origin) -> Val:
    """A string formatted from `v` (`f"rank_{rank}.pt"`): a name. What is read through it is this
    rank's data, not its rank: the rank in a file name picks the file, not whether it is read."""
    if v.rank is None:
        return replace(v, formatted=True)
    return Val(local=Origin(LOCAL, origin.path, origin.line, origin.text), params=v.params, formatted=True)


def _parts(self, node) -> Val:
    """Any other expression: made of its parts."""
    return combine(*(self.value(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)))


_DISPATCH: dict = {}  # expression class -> its Evaluator method


def _is_minus_one(node: ast.AST) -> bool:
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and \
        isinstance(node.operand, ast.Constant) and node.operand.value == 1



def _mesh_dim(call: ast.Call, mesh: Val) -> str | None:
    """The dimension a DeviceMesh call names: its string argument (`mesh.get_group("tp")`,
    `mesh_dim="tp"`), else the submesh's own (`mesh["tp"].get_group()`)."""
    for a in [*call.args[:1], *(k.value for k in call.keywords if k.arg == "mesh_dim")]:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            return a.value
    typ = mesh.typ or ""
    return typ[5:] if typ.startswith("mesh:") and not call.args else None


def mesh_dim_of(test: ast.AST, value) -> str | None:
    """The DeviceMesh dimension whose coordinate a condition reads (`mesh.get_local_rank("dp") == 0`,
    `dp_mesh.get_local_rank() == 0`), None when it reads none or several."""
    dims = set()
    for node in ast.walk(test):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get_local_rank":
            recv = value(node.func.value)
            if (recv.typ or "").startswith("mesh"):
                dims.add(_mesh_dim(node, recv))
    return dims.pop() if len(dims) == 1 else None
