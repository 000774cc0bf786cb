"""One home per concern, checked from the source (ast) of collcheck/ (docs/architecture.md):
the COLLCHECK_* environment is read in the settings module alone, the point-to-point op set is
written once (logfile/ops.py), the header record is built once (logfile/records.py), the records
that intern strings, call sites and chains are decoded once (logfile/decode.py), the recorder holds
its collaborators instead of inheriting them, and the wheel claims no top-level name but
`collcheck`. Each check also runs on small made-up trees, one that keeps the rule and some that
break it, so that it can be seen to fail."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

from support.source_tree import ROOT, dotted_name, nodes, parsed, write_tree

SETTINGS = "collcheck/base/settings.py"
OPS = "collcheck/logfile/ops.py"
RECORDS = "collcheck/logfile/records.py"
DECODE = "collcheck/logfile/decode.py"
RECORDER = "collcheck/capture/recorder.py"
INTERNING = frozenset(("STRING", "SITE", "CHAIN"))  # the record kinds a decoder must resolve


def _where(path: str, node: ast.AST) -> str:
    return f"{path}:{node.lineno}"


# --- a. the COLLCHECK_* environment is read in the settings module only ----------------------

def _is_variable(value) -> bool:
    return isinstance(value, str) and (value == "COLLCHECK" or value.startswith("COLLCHECK_"))


def _variable_constants(trees: dict[str, ast.Module]) -> set[str]:
    """Names bound anywhere in the package to a variable's name (`ENV = "COLLCHECK_X"`)."""
    names = set()
    for tree in trees.values():
        for node in nodes(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) \
                    and _is_variable(node.value.value):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {name for t in targets if (name := dotted_name(t))}
    return names


def _variable(key: ast.AST, constants: set[str]) -> str | None:
    """The variable a key names: "COLLCHECK_X", f"COLLCHECK_{x}", "COLLCHECK_" + x, a constant."""
    if isinstance(key, ast.Constant):
        return key.value if _is_variable(key.value) else None
    if isinstance(key, ast.JoinedStr) and key.values and isinstance(key.values[0], ast.Constant) \
            and str(key.values[0].value).startswith("COLLCHECK"):
        return ast.unparse(key)
    if isinstance(key, ast.BinOp) and isinstance(key.op, ast.Add):
        return _variable(key.left, constants)
    name = dotted_name(key)
    return name if name in constants else None


def _environ(node: ast.AST | None, aliases: set[str]) -> bool:
    """os.environ, a name for it, or a copy of it (dict(os.environ, ...), os.environ.copy())."""
    if isinstance(node, ast.Attribute) and node.attr == "environ":
        return True
    if isinstance(node, ast.Name):
        return node.id in aliases
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "dict" and node.args:
            return _environ(node.args[0], aliases)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "copy":
            return _environ(node.func.value, aliases)
    return False


def _aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names that stand for os.environ or a copy of it, names for os.getenv) in one module:
    `from os import environ as env`, a parameter that defaults to os.environ, `env = os.environ`."""
    environ, getenv = {"environ"}, {"getenv"}
    for node in nodes(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            environ |= {a.asname or a.name for a in node.names if a.name == "environ"}
            getenv |= {a.asname or a.name for a in node.names if a.name == "getenv"}
    for _ in range(3):  # aliases of aliases
        for node in nodes(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                a = node.args
                positional = a.posonlyargs + a.args
                pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
                pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
                environ |= {arg.arg for arg, default in pairs if _environ(default, environ)}
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and _environ(node.value, environ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                environ |= {t.id for t in targets if isinstance(t, ast.Name)}
    return environ, getenv


def _read_keys(node: ast.AST, environ: set[str], getenv: set[str]) -> list[ast.AST]:
    """The keys this node reads from the environment: environ.get(k) / .setdefault(k),
    getenv(k), environ[k] (load), k in environ. Writes (environ[k] = v, del, pop, update,
    dict(os.environ, K=v)) read nothing."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault") and _environ(func.value, environ)) \
                or dotted_name(func) in getenv:
            return [node.args[0]]
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _environ(node.value, environ):
        return [node.slice]
    if isinstance(node, ast.Compare):
        lefts = [node.left, *node.comparators[:-1]]
        return [left for left, op, right in zip(lefts, node.ops, node.comparators)
                if isinstance(op, (ast.In, ast.NotIn)) and _environ(right, environ)]
    return []


def environment_reads(root: Path) -> list[str]:
    """'path:line: VARIABLE' for each read of a COLLCHECK variable outside the settings module."""
    trees = parsed(root)
    constants = _variable_constants(trees)
    found = []
    for path, tree in trees.items():
        if path == SETTINGS:
            continue
        environ, getenv = _aliases(tree)
        for node in nodes(tree):
            for key in _read_keys(node, environ, getenv):
                if (variable := _variable(key, constants)) is not None:
                    found.append(f"{_where(path, node)}: {variable}")
    return found


# --- b. one point-to-point op set -------------------------------------------------------------

def _literal_strings(node: ast.AST) -> set[str] | None:
    """The strings of a literal collection: a tuple, list or set display, a dict's keys, or
    "a b c".split() (as in frozenset("...".split())); None for anything else."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elements = node.elts
    elif isinstance(node, ast.Dict):
        elements = [k for k in node.keys if k is not None]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "split" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return set(node.func.value.value.split(*[a.value for a in node.args if isinstance(a, ast.Constant)]))
    else:
        return None
    return {e.value for e in elements if isinstance(e, ast.Constant) and isinstance(e.value, str)}


def p2p_op_sets(root: Path) -> list[str]:
    """'path:line' of every literal that names both "send" and "recv_" (a set of P2P ops)."""
    return [_where(path, node) for path, tree in parsed(root).items() for node in nodes(tree)
            if {"send", "recv_"} <= (_literal_strings(node) or set())]


# --- c. one header builder ----------------------------------------------------------------------

def header_builders(root: Path) -> list[str]:
    """'path:line' of every {"k": HEADER, ...} literal (or dict(k=HEADER, ...))."""
    found = []
    for path, tree in parsed(root).items():
        for node in nodes(tree):
            if isinstance(node, ast.Dict):
                hit = any(isinstance(k, ast.Constant) and k.value == "k" and dotted_name(v) == "HEADER"
                          for k, v in zip(node.keys, node.values))
            elif isinstance(node, ast.Call) and dotted_name(node.func) == "dict":
                hit = any(kw.arg == "k" and dotted_name(kw.value) == "HEADER" for kw in node.keywords)
            else:
                continue
            if hit:
                found.append(_where(path, node))
    return found


# --- d. one record decoder ----------------------------------------------------------------------

def _interning_names(tree: ast.Module) -> set[str]:
    """STRING, SITE, CHAIN and the local names bound to them (`string_kind = lf.STRING`)."""
    names = set(INTERNING)
    for node in nodes(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                names |= {t.id for t, v in pairs if isinstance(t, ast.Name) and dotted_name(v) in INTERNING}
    return names


def interning_kind_tests(root: Path) -> list[str]:
    """'path:line' of every comparison with (or `case` on) a STRING, SITE or CHAIN record kind:
    the places that decode interning records."""
    found = []
    for path, tree in parsed(root).items():
        names = _interning_names(tree)
        for node in nodes(tree):
            if isinstance(node, ast.Compare):
                operands = []
                for operand in (node.left, *node.comparators):
                    operands += operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
            elif isinstance(node, ast.MatchValue):
                operands = [node.value]
            else:
                continue
            if any(dotted_name(o) in names for o in operands):
                found.append(_where(path, node))
    return found


# --- e. no mixin bases on the recorder ----------------------------------------------------------

def recorder_bases(root: Path) -> list[str]:
    """The bases of `class Recorder` in capture/recorder.py (a missing class is reported too)."""
    tree = ast.parse((root / RECORDER).read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Recorder"]
    if not classes:
        return [f"no class Recorder in {RECORDER}"]
    return [ast.unparse(base) for c in classes for base in c.bases]


# --- f. collcheck and nothing else top-level ----------------------------------------------------

def top_level_claims(root: Path) -> list[str]:
    """Top-level names other than collcheck: in the wheel's packages or force-included files
    (collcheck.pth, a startup hook, is not importable), or a top-level package or tui/ folder."""
    wheel = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    out = [f"wheel package: {p}" for p in wheel.get("packages", []) if p != "collcheck"]
    out += [f"wheel file: {target}" for target in wheel.get("force-include", {}).values()
            if not (target.endswith(".pth") and "/" not in target) and not target.startswith("collcheck/")]
    out += [f"top-level package: {d.name}/" for d in sorted(root.iterdir())
            if d.is_dir() and d.name != "collcheck" and ((d / "__init__.py").exists() or d.name == "tui")]
    return out


# --- the facts, on this tree --------------------------------------------------------------------

def test_no_collcheck_variable_is_read_outside_the_settings_module():
    assert environment_reads(ROOT) == []


def test_the_point_to_point_op_set_is_written_once_in_logfile_ops():
    assert [where.split(":")[0] for where in p2p_op_sets(ROOT)] == [OPS], p2p_op_sets(ROOT)


def test_the_header_record_is_built_in_logfile_records_only():
    assert [where.split(":")[0] for where in header_builders(ROOT)] in ([], [RECORDS]), header_builders(ROOT)


def test_interning_records_are_decoded_in_logfile_decode_only():
    assert {where.split(":")[0] for where in interning_kind_tests(ROOT)} <= {DECODE}, interning_kind_tests(ROOT)


def test_the_recorder_has_no_mixin_bases():
    assert recorder_bases(ROOT) == []


def test_collcheck_is_the_only_top_level_name():
    assert top_level_claims(ROOT) == []


# --- each check keeps a tree that satisfies it and catches one that breaks it ----------------

ALLOWED_ENV = {
    SETTINGS: 'import os\nTRUE = {"1"}\ndef on(environ=os.environ):\n    return environ.get("COLLCHECK") in TRUE\n'
              'DIR = os.environ.get("COLLCHECK_DIR", "logs")\n',
    "collcheck/cli/record.py": (
        'import os\nfrom ..base import settings\n'
        'def child():\n'
        '    env = dict(os.environ, COLLCHECK="1", COLLCHECK_RUN_ID=settings.new_run_id())\n'
        '    env["COLLCHECK_DIR"] = "logs"\n'
        '    env.update(COLLCHECK_LIVE="0")\n'
        '    os.environ["COLLCHECK_RUN_ID"] = "x"\n'
        '    os.environ.pop("COLLCHECK_STACK", None)\n'
        '    del os.environ["COLLCHECK_MAX_MB"]\n'
        '    return env, os.environ.get("PATH"), os.environ["HOME"], "PATH" in os.environ\n'),
}


@pytest.mark.parametrize("line, expected", [
    ('import os\nX = os.environ.get("COLLCHECK_WORKERS", "0")', "COLLCHECK_WORKERS"),
    ('import os\nX = os.getenv("COLLCHECK")', "COLLCHECK"),
    ('import os\nX = os.environ["COLLCHECK_DEBUG"]', "COLLCHECK_DEBUG"),
    ('import os\nX = "COLLCHECK_DEBUG" not in os.environ', "COLLCHECK_DEBUG"),
    ('from os import environ as env\nX = env.get("COLLCHECK_DIR")', "COLLCHECK_DIR"),
    ('from os import getenv\nX = getenv("COLLCHECK_DIR")', "COLLCHECK_DIR"),
    ('import os\ndef f(environ=os.environ):\n    return environ.get("COLLCHECK_FASTPATH")', "COLLCHECK_FASTPATH"),
    ('import os\ndef f(env=os.environ):\n    return env["COLLCHECK_FASTPATH"]', "COLLCHECK_FASTPATH"),
    ('import os\ndef f():\n    env = dict(os.environ)\n    return env.get("COLLCHECK_RUN_ID")', "COLLCHECK_RUN_ID"),
    ('import os\nX = os.environ.setdefault("COLLCHECK_RUN_ID", "x")', "COLLCHECK_RUN_ID"),
    ('import os\nVERBOSE = "COLLCHECK_BUILD_VERBOSE"\nX = os.environ.get(VERBOSE)', "VERBOSE"),
    ('import os\nfrom ..base import names\nX = os.environ.get(names.VERBOSE)', "VERBOSE"),  # bound in settings.py below
    ('import os\ndef f(n):\n    return os.environ.get(f"COLLCHECK_{n}")', "f'COLLCHECK_{n}'"),
], ids=["get", "getenv", "subscript", "not-in", "from-os-environ", "from-os-getenv", "environ-parameter",
        "parameter-default", "copy", "setdefault", "constant", "constant-elsewhere", "f-string"])
def test_the_environment_check_catches_a_read_outside_settings(tmp_path, line, expected):
    files = dict(ALLOWED_ENV)
    files[SETTINGS] += 'VERBOSE = "COLLCHECK_BUILD_VERBOSE"\n'
    assert environment_reads(write_tree(tmp_path / "ok", files)) == []
    files["collcheck/model/run.py"] = line + "\n"
    line_no = line.count("\n") + 1
    assert environment_reads(write_tree(tmp_path / "bad", files)) == [f"collcheck/model/run.py:{line_no}: {expected}"]


P2P_DEFINED_ONCE = {
    OPS: 'WIRE_OPS = {"allreduce_": 1, "send": 2, "recv_": 3, "recv_any_source_": 4}\n'
         'P2P_OPS = frozenset(op for op in WIRE_OPS if op.startswith(("send", "recv")))\n',
    "collcheck/report/perfetto.py": 'from ..logfile.ops import P2P_OPS\nAPIS = ("send", "recv", "isend")\n'
                                    'def p2p(op):\n    return op in P2P_OPS or op == "send"\n',
}


@pytest.mark.parametrize("module, text", [
    ("collcheck/report/perfetto.py", 'def p2p(op):\n    return op in ("send", "recv_", "recv_any_source_")\n'),
    ("collcheck/model/run.py", 'P2P_OPS = frozenset(["send", "recv_"])\n'),
    ("collcheck/logfile/format.py", '_P2P_KINDS = {"send": 1, "recv_": 2, "recv_any_source_": 3}\n'),
    ("collcheck/synth/program.py", 'P2P = {"recv_", "send"}\n'),
    ("collcheck/capture/live/tables.py", 'P2P = frozenset("send recv_ recv_any_source_".split())\n'),
    (OPS, P2P_DEFINED_ONCE[OPS] + 'P2P = ("send", "recv_", "recv_any_source_")\n'),  # twice in ops.py
], ids=["tuple", "frozenset-list", "dict-keys", "set", "split", "twice-in-ops"])
def test_the_p2p_check_catches_a_second_definition(tmp_path, module, text):
    assert [w.split(":")[0] for w in p2p_op_sets(write_tree(tmp_path / "ok", P2P_DEFINED_ONCE))] == [OPS]
    bad = write_tree(tmp_path / "bad", {**P2P_DEFINED_ONCE, module: text})
    assert sorted(w.split(":")[0] for w in p2p_op_sets(bad)) == sorted([OPS, module])


ONE_HEADER = {
    RECORDS: 'from . import format as lf\ndef header(**fields):\n    return {"k": lf.HEADER, **fields}\n',
    "collcheck/logfile/reader.py": 'from . import format as lf\n'
                                   'def is_header(rec):\n    return rec.get("k") == lf.HEADER\n'
                                   'X = {"k": lf.COLL}\n',
    "collcheck/replay/minimize.py": 'HEADER = "#!/usr/bin/env python3"\nSCRIPT = {"text": HEADER}\n',
}


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/capture/recorder.py", 'from ..logfile import format as lf\nH = {"k": lf.HEADER, "rank": 0}\n', 2),
    ("collcheck/synth/logs.py", 'from ..logfile.format import HEADER\ndef h():\n    return dict(k=HEADER, rank=0)\n', 3),
    ("collcheck/logfile/reader.py", 'from . import format as lf\nout = {"k": lf.HEADER}\n', 2),
    (RECORDS, ONE_HEADER[RECORDS] + 'def again():\n    return {"k": lf.HEADER}\n', 5),  # two in records.py
], ids=["recorder", "dict-call", "reader", "twice-in-records"])
def test_the_header_check_catches_a_second_builder(tmp_path, module, text, line):
    assert header_builders(write_tree(tmp_path / "ok", ONE_HEADER)) == [f"{RECORDS}:3"]
    found = header_builders(write_tree(tmp_path / "bad", {**ONE_HEADER, module: text}))
    assert f"{module}:{line}" in found and len(found) == 2, found


ONE_DECODER = {
    DECODE: 'from . import format as lf\n'
            'def records(raw):\n'
            '    for rec in raw:\n'
            '        if rec["k"] == lf.STRING:\n            continue\n'
            '        match rec["k"]:\n            case lf.SITE:\n                continue\n'
            '        yield rec\n',
    "collcheck/logfile/records.py": 'from . import format as lf\nSCHEMA = {lf.STRING: "i s", lf.SITE: "i f l n"}\n',
    "collcheck/logfile/writer.py": 'from . import format as lf\ndef keep(i, s):\n    return {"k": lf.STRING, "i": i, "s": s}\n',
    "collcheck/model/run.py": 'from ..logfile import format as lf\ndef coll(rec):\n    return rec["k"] == lf.COLL\n',
}


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/logfile/scan.py", 'from . import format as lf\ndef f(k):\n    return k == lf.STRING\n', 3),
    ("collcheck/replay/plan.py", 'from ..logfile.format import SITE\ndef f(k):\n    return SITE != k\n', 3),
    ("collcheck/model/run.py", 'from ..logfile import format as lf\ndef f(k):\n    return k in (lf.CHAIN, lf.SITE)\n', 3),
    ("collcheck/logfile/scan.py", 'from . import format as lf\nstring_kind, coll = lf.STRING, lf.COLL\n'
                                  'def f(k):\n    return k == string_kind\n', 4),
    ("collcheck/logfile/scan.py", 'from . import format as lf\ndef f(k):\n    match k:\n        case lf.CHAIN:\n'
                                  '            return 1\n', 4),
], ids=["equals", "reversed", "in-tuple", "alias", "match"])
def test_the_decoder_check_catches_a_second_decoding_loop(tmp_path, module, text, line):
    assert interning_kind_tests(write_tree(tmp_path / "ok", ONE_DECODER)) == [f"{DECODE}:4", f"{DECODE}:7"]
    found = interning_kind_tests(write_tree(tmp_path / "bad", {**ONE_DECODER, module: text}))
    assert [w for w in found if not w.startswith(DECODE)] == [f"{module}:{line}"]


@pytest.mark.parametrize("text, expected", [
    ("class Recorder:\n    def __init__(self, native, live):\n        self.native, self.live = native, live\n", []),
    ("class Completions: ...\nclass Recorder(Completions):\n    pass\n", ["Completions"]),
    ("from . import live\nclass Recorder(Base, live.LiveTables):\n    pass\n", ["Base", "live.LiveTables"]),
    ("class Recording:\n    pass\n", [f"no class Recorder in {RECORDER}"]),
], ids=["no-bases", "mixin", "two-bases", "missing"])
def test_the_recorder_check_reads_its_bases(tmp_path, text, expected):
    assert recorder_bases(write_tree(tmp_path, {RECORDER: text})) == expected


WHEEL = '[tool.hatch.build.targets.wheel]\npackages = {packages}\n\n' \
        '[tool.hatch.build.targets.wheel.force-include]\n"collcheck.pth" = "{pth}"\n'


@pytest.mark.parametrize("packages, pth, extra, expected", [
    ('["collcheck"]', "collcheck.pth", {}, []),
    ('["collcheck", "tui"]', "collcheck.pth", {}, ["wheel package: tui"]),
    ('["collcheck"]', "tui/__init__.py", {}, ["wheel file: tui/__init__.py"]),
    ('["collcheck"]', "collcheck.pth", {"tui/__init__.py": ""}, ["top-level package: tui/"]),
    ('["collcheck"]', "collcheck.pth", {"tui/app.py": ""}, ["top-level package: tui/"]),
    ('["collcheck"]', "collcheck.pth", {"helpers/__init__.py": ""}, ["top-level package: helpers/"]),
], ids=["collcheck-only", "wheel-package", "wheel-file", "tui-package", "tui-folder", "other-package"])
def test_the_top_level_check_catches_a_second_name(tmp_path, packages, pth, extra, expected):
    files = {"pyproject.toml": WHEEL.format(packages=packages, pth=pth), "collcheck/__init__.py": "",
             "collcheck/tui/__init__.py": "", "tests/conftest.py": "", "docs/tui/overview.svg": "", **extra}
    assert top_level_claims(write_tree(tmp_path, files)) == expected
