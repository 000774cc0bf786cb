"""What an installed package's functions issue, read from the package's own source.

A call into an installed package that no framework table knows (a metrics library's `compute()`,
a helper of the user's own package installed in site-packages) is followed by running the lint's
own interprocedural analysis over the package: the module that defines the called function and the
modules of the package it imports, read and parsed, never imported or run. What each function of
those modules issues (its first collective and the chain down to it), its classes and the names
its modules re-export are a package's summary, cached per package version
(`<COLLCHECK_CACHE>/lint/<package>-<version>.json`): the next lint reads a few KiB, not the package.
The framework tables stay for what the source cannot show (C++ calls, dynamic dispatch) and for the
fixes in the framework's terms: they are asked first.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import sys
import tempfile

from ..knowledge.frames import relative_path
from .program import Program, _index, _parse

SUMMARY_VERSION = 1  # bumped when what a summary holds or how it is made changes
MAX_MODULES = 400  # modules read from one package for one lint: the closure of the called ones, bounded
MAX_CACHE_BYTES = 64 << 20
MAX_REMEMBERED = 64  # package summaries a process keeps between lints (a diff reads the program again and again)
NOT_READ = frozenset({"torch", "collcheck", "numpy", "typing_extensions"}) | frozenset(sys.stdlib_module_names)


_READ: dict = {}  # (package, folder, version, cache folder) -> _Package: read once per process


class Libraries:
    """The installed packages one lint calls into: their summaries, read or made on demand."""

    def __init__(self, cache_dir: str | None, search_path: list[str] | None = None):
        self.cache_dir = cache_dir
        self.search = list(search_path if search_path is not None else sys.path)
        self._packages: dict[str, _Package | None] = {}
        self._versions: dict[str, list] | None = None  # top-level package -> the distributions installing it

    def function(self, name: str | None):
        """(api name, sometimes, chain) of the package function `name` (resolved dotted name), or None."""
        pkg = self._package(name)
        return pkg.lookup(name) if pkg is not None else None

    def class_of(self, name: str | None) -> str | None:
        """The qualified name of the package class `name` means (its instances' methods are followed)."""
        pkg = self._package(name)
        return pkg.class_of(name) if pkg is not None else None

    @property
    def read(self) -> list[dict]:
        """What this lint read: {package, version, from: "cache" | "source", modules} per package."""
        return [p.report() for p in self._packages.values() if p is not None]

    def _package(self, name: str | None):
        if not name or "." not in name:
            return None
        top = name.partition(".")[0]
        if top in NOT_READ or not top.isidentifier():
            return None
        if top not in self._packages:
            self._packages[top] = self._find(top)
        return self._packages[top]

    def _find(self, top: str):
        """The installed package `top` (found without importing it), or None: not installed, or not
        from an installation folder (the program's own modules are linted as the program)."""
        try:
            spec = importlib.machinery.PathFinder.find_spec(top, self.search)
        except (ImportError, ValueError, OSError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        root = os.path.realpath(list(spec.submodule_search_locations)[0])
        if relative_path(os.path.join(root, "__init__.py")) is None:
            return None  # not from an installation folder
        version, requires = self._version(top, root)
        if requires is not None and not any(_names_torch(r) for r in requires):
            return None  # a package that does not depend on torch cannot issue its collectives (sympy, tqdm)
        key = (top, root, version, self.cache_dir)
        found = _READ.get(key)
        if found is None:
            if len(_READ) >= MAX_REMEMBERED:
                _READ.pop(next(iter(_READ)))
            found = _READ[key] = _Package(top, root, version, self.cache_dir)
        found.read_now = 0
        return found

    def _version(self, top: str, root: str) -> tuple[str, list | None]:
        """(version, requirements) of the installed distribution of package `top` (its metadata,
        read, never run); without one, the package folder's modification time and None."""
        import importlib.metadata  # (tens of ms to import: only when a package is called into)

        try:  # the distribution named as the package (most are), else the one whose top_level.txt names it
            named = next(iter(importlib.metadata.distributions(name=top, path=self.search)), None)
            if named is not None and isinstance(named.version, str):
                return named.version, list(named.requires) if named.requires else None  # (none said: unknown)
        except Exception:  # noqa: BLE001, S110 - damaged metadata: looked for otherwise
            pass
        if self._versions is None:
            self._versions = {}
            try:
                for dist in importlib.metadata.distributions(path=self.search):
                    for name in _top_levels(dist):
                        self._versions.setdefault(name, []).append(dist)
            except Exception:  # noqa: BLE001, S110 - damaged metadata: the folder's time stands for the version
                pass
        dists = self._versions.get(top)
        try:
            if dists and isinstance(dists[0].version, str):
                return dists[0].version, list(dists[0].requires) if dists[0].requires else None
        except Exception:  # noqa: BLE001, S110 - damaged metadata: as if there were none
            pass
        try:
            return f"mtime{os.stat(root).st_mtime_ns}", None
        except OSError:
            return "unknown", None


class _Package:
    """One package's summary: functions (qualified name -> (api, sometimes, chain)), classes,
    re-exported names (alias -> target), and the modules read into it."""

    def __init__(self, top: str, root: str, version: str, cache_dir: str | None):
        self.top, self.root, self.version = top, root, version
        self.base = os.path.dirname(root)
        self.cache_path = None
        if cache_dir:
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{top}-{version}")[:200]
            self.cache_path = os.path.join(cache_dir, "lint", f"{safe}.json")
        self.functions: dict[str, list] = {}
        self.classes: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.modules: set[str] = set()
        self.source = "cache" if self._load() else None
        self.read_now = 0  # modules read from source by this lint

    def report(self) -> dict:
        return {"package": self.top, "version": self.version, "from": "source" if self.read_now else "cache",
                "modules": len(self.modules)}

    # -- lookups --------------------------------------------------------------------------------
    def lookup(self, name: str):
        name = self._target(name)
        if name not in self.functions:
            self._read_for(name)
        found = self.functions.get(self._target(name))
        if found is None:
            return None
        api, sometimes, chain = found
        return api, sometimes, tuple((os.path.join(self.base, p), line, text) for p, line, text in chain)

    def class_of(self, name: str) -> str | None:
        name = self._target(name)
        if name not in self.classes:
            self._read_for(name)
        name = self._target(name)
        return name if name in self.classes else None

    def _target(self, name: str) -> str:
        """`pkg.Metric` re-exported from `pkg.metric`: the name where it is defined (chains of aliases)."""
        for _ in range(16):
            head, rest = name, ""
            while head and head not in self.aliases:
                head, _, last = head.rpartition(".")
                rest = f".{last}{rest}"
            if not head:
                return name
            name = self.aliases[head] + rest
        return name

    # -- reading the source -----------------------------------------------------------------------
    def _read_for(self, name: str) -> None:
        """Read the module that would define `name` (and what it imports of the package), once."""
        parts = name.split(".")
        for i in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:i])
            if module in self.modules:
                return  # read already: `name` is not a function or class of it
            if self._file(module) is not None:
                self._read({module})
                return

    def _file(self, module: str) -> str | None:
        rel = module.split(".")
        if rel[0] != self.top:
            return None
        path = os.path.join(self.base, *rel)
        for candidate in (os.path.join(path, "__init__.py"), path + ".py"):
            if os.path.isfile(candidate):
                return candidate
        return None

    def _read(self, start: set[str]) -> None:
        from .interprocedural import Lint  # (the lint itself runs over the package)

        prog, todo, seen = Program(), list(start), set()
        while todo and len(seen) < MAX_MODULES:  # (modules read before are read again: their callers need them)
            module = todo.pop()
            if module in seen:
                continue
            seen.add(module)
            self.modules.add(module)
            path = self._file(module)
            mod = _parse(self.base, path, prog) if path is not None else None
            if mod is None:
                continue
            prog.modules.append(mod)
            _index(prog, mod)
            self.read_now += 1
            for local, full in mod.imports.items():
                if full.startswith(self.top + ".") or full == self.top:
                    self.aliases.setdefault(f"{mod.name}.{local}", full)
                    parts = full.split(".")
                    for cut in range(len(parts), 0, -1):  # the module part of `pkg.mod.func`
                        if self._file(".".join(parts[:cut])) is not None:
                            todo.append(".".join(parts[:cut]))
                            break
        names = {m.path: m.name for m in prog.modules}

        def qualified(key: str) -> str:  # '/site/pkg/metric.py:Metric.compute' -> 'pkg.metric.Metric.compute'
            path, _, qual = key.partition(":")
            return f"{names[path]}.{qual}"
        self.classes.update(qualified(c) for c in prog.classes)
        lint = Lint(prog)
        lint.run()
        for key, (issued, node) in lint.issues.items():
            fn = prog.functions[key]
            site = (fn.module.path, node.lineno, fn.module.text(node))
            chain = [(os.path.relpath(p, self.base), line, text) for p, line, text in (site, *issued.chain)]
            self.functions[qualified(key)] = [issued.api.name, issued.api.sometimes or issued.maybe, chain]
        self._save()

    # -- the cache ------------------------------------------------------------------------------
    def _load(self) -> bool:
        """The cached summary of this package version, if there is a sound one."""
        if self.cache_path is None:
            return False
        try:
            if os.path.getsize(self.cache_path) > MAX_CACHE_BYTES:
                return False
            with open(self.cache_path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("summary") != SUMMARY_VERSION or data.get("version") != self.version:
                return False
            functions = {str(k): [str(v[0]), bool(v[1]), [(str(p), int(ln), str(t)) for p, ln, t in v[2]]]
                         for k, v in data["functions"].items()}
            classes, aliases = {str(c) for c in data["classes"]}, {str(k): str(v) for k, v in data["aliases"].items()}
            modules = {str(m) for m in data["modules"]}
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
            return False  # none, or not one this collcheck wrote: made again
        self.functions, self.classes, self.aliases, self.modules = functions, classes, aliases, modules
        return True

    def _save(self) -> None:
        if self.cache_path is None:
            return
        data = {"summary": SUMMARY_VERSION, "package": self.top, "version": self.version,
                "modules": sorted(self.modules), "classes": sorted(self.classes), "aliases": self.aliases,
                "functions": self.functions}
        folder = os.path.dirname(self.cache_path)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".summary-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, self.cache_path)  # (a new name, renamed over: never written through a link)
        except OSError:
            pass  # no cache: the next lint reads the package again



def _top_levels(dist) -> set[str]:
    """The top-level packages a distribution says it installs (top_level.txt; its file list, which
    can run to tens of thousands of lines, is not read)."""
    text = dist.read_text("top_level.txt") or ""
    return {line.strip() for line in text.splitlines() if line.strip()}


def _names_torch(requirement: str) -> bool:
    """Whether a requirement (`torch>=2.1; extra == "torch"`) is torch or a package built on it."""
    name = requirement.split(";")[0].strip().lower()
    for stop in "<>=!~[ (":
        name = name.split(stop)[0]
    return name in ("torch", "pytorch") or name.startswith(("torch", "pytorch-", "lightning", "accelerate",
                                                             "deepspeed", "transformers"))
