"""The program the lint reads: every Python file under the paths given, parsed once, with each
module's imports resolved to full names and every function and class indexed, so a call can be
followed into the user's own functions across files.

Files are the user's own sources, read as text and parsed with `ast` (never imported or run);
each is bounded in size, and one that does not parse is skipped with a note.
"""

from __future__ import annotations

import ast
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 4 << 20  # a generated or vendored file past this is skipped, with a note
SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "venv", "node_modules", ".tox", ".eggs",
                       "build", "dist", ".mypy_cache", ".pytest_cache"})
IGNORE_MARK = "collcheck: ignore"


@dataclass
class Module:
    path: str
    name: str  # dotted, relative to the folder given ("pkg.utils"), or the file's stem
    tree: ast.Module
    lines: list[str]
    imports: dict[str, str] = field(default_factory=dict)  # local name -> full dotted name
    ignored: frozenset = frozenset()  # lines marked `# collcheck: ignore[rank-branch]` (or bare)
    _texts: dict = field(default_factory=dict, repr=False)

    def text(self, node: ast.AST, limit: int = 80) -> str:
        """The source of `node` on one line, for messages (cached: origins ask again and again)."""
        key = (node.lineno, node.col_offset, getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None), limit)
        got = self._texts.get(key)
        if got is None:
            got = self._texts[key] = _shorten(" ".join(self._segment(node).split()), limit)
        return got

    def _segment(self, node) -> str:
        first, last = node.lineno - 1, (getattr(node, "end_lineno", None) or node.lineno) - 1
        if not 0 <= first <= last < len(self.lines) or getattr(node, "end_col_offset", None) is None:
            return self.lines[first].strip() if 0 <= first < len(self.lines) else ""
        lines = [line.encode() for line in self.lines[first:last + 1]]  # ast's columns count UTF-8 bytes
        lines[-1] = lines[-1][:node.end_col_offset]
        lines[0] = lines[0][node.col_offset:]
        return b"\n".join(lines).decode(errors="replace")


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


@dataclass
class Function:
    key: str  # "path:Class.method" or "path:func" or "path:<module>"
    module: Module
    node: ast.AST  # FunctionDef, AsyncFunctionDef or the Module (its top-level statements)
    cls: str | None  # the enclosing class's key ("module:Class"), for `self.x`
    params: list[str]
    parent: str | None = None  # the enclosing function's key, for a closure's variables

    @property
    def name(self) -> str:
        return self.key.rpartition(":")[2].rpartition(".")[2]


@dataclass
class Program:
    modules: list[Module] = field(default_factory=list)
    functions: dict[str, Function] = field(default_factory=dict)
    classes: dict[str, list[str]] = field(default_factory=dict)  # class key -> its bases' last names
    parents: set = field(default_factory=set)  # keys of functions with functions nested in them
    class_names: dict[str, list[str]] = field(default_factory=dict)  # class name -> class keys
    skipped: list[str] = field(default_factory=list)  # "path: why" for files not read
    lines: int = 0
    _called: frozenset | None = field(default=None, repr=False)
    _rpc: bool | None = field(default=None, repr=False)
    _resolved: dict = field(default_factory=dict, repr=False)

    def uses_rpc(self) -> bool:
        """Whether any module imports torch.distributed.rpc (only then is a rank dispatch's RPC sought)."""
        if self._rpc is None:
            self._rpc = any(full.startswith("torch.distributed.rpc") for m in self.modules for full in m.imports.values())
        return self._rpc

    def called_names(self) -> frozenset:
        """The last names of everything the program calls (`f(...)`, `x.f(...)`): a function whose
        name is not among them is an entry point, its `rank` parameter this process's rank."""
        if self._called is None:  # (read from the text: a walk of every tree costs seconds at 100k lines)
            self._called = frozenset(name for m in self.modules for line in m.lines for name in _CALLED.findall(line))
        return self._called

    def resolve(self, module: Module, dotted: str) -> str | None:
        """The key of the program function a (resolved) dotted name means, if any."""
        top = self._top.get(module.path, {})
        if dotted in top:
            return top[dotted]
        head = dotted.partition(".")[0]
        full = module.imports.get(head)
        if full is None:
            return None
        cache_key = (module.path, dotted)  # (asked again on every walk of every function)
        if cache_key not in self._resolved:
            self._resolved[cache_key] = self._resolve_full(module, full + dotted[len(head):])
        return self._resolved[cache_key]

    def _resolve_full(self, module: Module, full: str, depth: int = 0) -> str | None:
        """The key of the program function or class a full dotted name means: defined in the module
        it names, or re-exported there (`from .summary import summarize` in a package's __init__)."""
        mod, _, name = full.rpartition(".")
        cached = self._resolved.get((module.path, mod, name), False)
        if cached is not False:
            return cached
        if not self._by_tail:
            for m in self.modules:
                parts = m.name.split(".")
                for i in range(len(parts)):
                    self._by_tail.setdefault(".".join(parts[i:]), []).append(m)
        parts = mod.split(".")
        cands = list(self._by_tail.get(mod, ())) + [m for i in range(1, len(parts))
                                                   for m in self._by_tail.get(".".join(parts[i:]), ())
                                                   if m.name == ".".join(parts[i:])]
        here = os.path.dirname(module.path)
        cands.sort(key=lambda m: os.path.dirname(m.path) != here)  # this folder's module first
        found = next((k for k in (self._top.get(m.path, {}).get(name) for m in cands) if k), None)
        if found is None and depth < 8:
            self._resolved[(module.path, mod, name)] = None  # (a cycle of re-exports ends here)
            again = next((m.imports[name] for m in cands if m.imports.get(name) not in (None, full)), None)
            if again is not None:
                found = self._resolve_full(module, again, depth + 1)
        self._resolved[(module.path, mod, name)] = found
        return found

    def method(self, cls: str | None, name: str) -> str | None:
        """`self.name` in class `cls`: its own method or a base class's (by the base's name)."""
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            key = f"{cls}.{name}"
            if key in self.functions:
                return key
            bases = [b for base in self.classes.get(cls, ()) for b in self.class_names.get(base.rpartition(".")[2], ())]
            cls = bases[0] if bases else None
        return None

    _top: dict = field(default_factory=dict)  # module path -> {top-level name or Class: key}
    _by_tail: dict = field(default_factory=dict)  # each tail of a module's dotted name -> modules
    _resolved: dict = field(default_factory=dict)  # (module path, imported module, name) -> key or None


_CALLED = re.compile(r"(?<!def )(?<!class )\b([A-Za-z_]\w*)\s*\(")


def load(paths: list[str]) -> Program:
    prog = Program()
    for root, path in _files(paths, prog):
        mod = _parse(root, path, prog)
        if mod is not None:
            prog.modules.append(mod)
            _index(prog, mod)
    return prog


def _files(paths, prog):
    for p in paths:
        if os.path.isdir(p):
            for dirpath, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
                for f in sorted(files):
                    if f.endswith(".py"):
                        yield p, os.path.join(dirpath, f)
        else:
            yield os.path.dirname(p) or ".", p


def _parse(root: str, path: str, prog: Program) -> Module | None:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO or a device would block or never end
            prog.skipped.append(f"{path}: not a regular file")
            return None
        if os.path.getsize(path) > MAX_FILE_BYTES:
            prog.skipped.append(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
            return None
        source = Path(path).read_bytes().decode("utf-8", errors="replace")
        tree = ast.parse(source, path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        prog.skipped.append(f"{path}: does not parse ({type(e).__name__}: {getattr(e, 'msg', '')})")
        return None
    except OSError as e:
        prog.skipped.append(f"{path}: {e.strerror or e}")
        return None
    lines = source.splitlines()
    prog.lines += len(lines)
    rel = os.path.relpath(path, root)
    name = ".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__")
    ignored = frozenset(i + 1 for i, line in enumerate(lines) if IGNORE_MARK in line and _ignores(line))
    mod = Module(path, name, tree, lines, ignored=ignored)
    package = Path(path).name == "__init__.py" and name and name != "__init__"  # its relative imports: the package's
    mod.imports = _imports(tree, f"{name}.__init__" if package else name)
    return mod


def _ignores(line: str) -> bool:
    rest = line.split(IGNORE_MARK, 1)[1]
    return not rest.startswith("[") or any(rule in rest.split("]")[0] for rule in ("rank-branch", "rank-root"))


def _statements(body):
    """Every statement, nested ones too (imports sit in functions and `try:` blocks), no expression."""
    for node in body:
        yield node
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, name, None)
            if inner:
                yield from _statements(inner)


def _imports(tree: ast.Module, module: str) -> dict[str, str]:
    out = {}
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[:-node.level] if node.level <= module.count(".") + 1 else []
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
    return out


def _index(prog: Program, mod: Module) -> None:
    top = prog._top.setdefault(mod.path, {})
    _add(prog, mod, f"{mod.path}:<module>", mod.tree, None, [])

    def visit(body, prefix: str, cls: str | None, outermost: bool, parent: str | None = None):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{mod.path}:{prefix}{node.name}"
                a = node.args
                params = [p.arg for p in a.posonlyargs + a.args] + ([a.vararg.arg] if a.vararg else []) \
                    + [p.arg for p in a.kwonlyargs]
                _add(prog, mod, key, node, cls, params, parent)
                if parent is not None:
                    prog.parents.add(parent)
                if outermost:
                    top.setdefault(node.name, key)
                visit(node.body, f"{prefix}{node.name}.", cls, False, key)
            elif isinstance(node, ast.ClassDef):
                ckey = f"{mod.path}:{prefix}{node.name}"
                prog.classes[ckey] = [_last_name(b) for b in node.bases]
                prog.class_names.setdefault(node.name, []).append(ckey)
                if outermost:
                    top.setdefault(node.name, ckey)
                visit(node.body, f"{prefix}{node.name}.", ckey, False, None)
            elif isinstance(node, (ast.If, ast.Try, ast.With)) and outermost:  # `if TYPE_CHECKING:`, guarded defs
                for block in (getattr(node, "body", []), getattr(node, "orelse", []), getattr(node, "finalbody", [])):
                    visit(block, prefix, cls, True)

    visit(mod.tree.body, "", None, True)


def _last_name(node: ast.AST) -> str:
    """The name a base class is known by (`nn.Module` -> "Module"; "" for `Generic[T]`, a call):
    looked at, never walked, so a base nested thousands deep costs nothing."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _add(prog, mod, key, node, cls, params, parent=None) -> None:
    prog.functions[key] = Function(key, mod, node, cls, params, parent)
