"""One floor for what collcheck knows, one place for how it says it (docs/architecture.md), checked
from the source (ast): whose code a frame is is decided in knowledge/frames.py alone (no other
module reads this machine's library paths or a path's library markers), each fix is phrased once
(knowledge/fixes.py), an output format is chosen in report/formats.py alone, and lint's classes
hold their collaborators instead of mixing them in; the views mark the cells the analysis blames and never vote. Each check also runs on small made-up trees
that keep the rule and that break it, so that it can be seen to fail."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from support.source_tree import ROOT, dotted_name, nodes, parsed, write_tree

FRAMES = "collcheck/knowledge/frames.py"
FIXES = "collcheck/knowledge/fixes.py"
FORMATS = "collcheck/report/formats.py"
SITES = "collcheck/knowledge/sites.py"
LIBRARY_MARKERS = ("site-packages", "dist-packages", "/lib/python")
FORMAT_NAMES = frozenset({"text", "json", "junit", "github", "sarif", "perfetto", "fr"})
FIX_WORDS = 8  # a fix's first words that another module may not repeat (a whole shorter one)
FIX_MIN_WORDS = 5  # shorter texts are names and fragments, not fixes


def _where(path: str, node: ast.AST) -> str:
    return f"{path}:{node.lineno}"


def _strings(tree: ast.AST):
    """Every string constant of a module (the literal parts of f-strings too), docstrings left out:
    they describe, they decide and say nothing to users."""
    docs = {id(n.body[0].value) for n in nodes(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for node in nodes(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node, node.value


# --- g. one frame classifier ----------------------------------------------------------------

def frame_classifiers(root: Path) -> list[str]:
    """'path:line' of each import of sysconfig and each literal naming a library folder outside
    knowledge/frames.py: a second answer to "is this frame the user's?"."""
    found = []
    for path, tree in parsed(root).items():
        if path == FRAMES:
            continue
        for node in nodes(tree):
            if isinstance(node, ast.Import) and any(a.name == "sysconfig" for a in node.names) or \
                    isinstance(node, ast.ImportFrom) and node.module == "sysconfig":
                found.append(_where(path, node))
        found += [_where(path, node) for node, text in _strings(tree) if any(m in text for m in LIBRARY_MARKERS)]
    return found


# --- h. one phrasing per fix ----------------------------------------------------------------

def _words(text: str) -> str:
    return " ".join(re.findall(r"[\w`'()]+", text.lower()))


def fix_copies(root: Path) -> list[str]:
    """'path:line' of each literal outside knowledge/fixes.py that repeats the first words of one
    of its fixes (a second phrasing of the same advice)."""
    trees = parsed(root)
    openings = set()
    for _, text in _strings(trees[FIXES]):
        words = _words(text).split()
        if len(words) >= FIX_MIN_WORDS:
            openings.add(" ".join(words[:FIX_WORDS]))
    found = []
    for path, tree in trees.items():
        if path == FIXES:
            continue
        found += [_where(path, node) for node, text in _strings(tree) if any(o in _words(text) for o in openings)]
    return found


# --- i. one format dispatch -----------------------------------------------------------------

def _is_format_name(node: ast.AST) -> bool:
    name = dotted_name(node)
    return name is not None and (name in ("fmt", "format") or name.endswith("_format"))


def format_dispatches(root: Path) -> list[str]:
    """'path:line' outside report/formats.py of each choice made on a format: a comparison of a
    format with a format's name, a table keyed by formats, a `--format` with its own choices."""
    found = []
    for path, tree in parsed(root).items():
        if path == FORMATS:
            continue
        for node in nodes(tree):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                names = {s.value for s in sides if isinstance(s, ast.Constant)}
                names |= {e.value for s in sides if isinstance(s, (ast.Tuple, ast.List, ast.Set))
                          for e in s.elts if isinstance(e, ast.Constant)}
                if any(_is_format_name(s) for s in sides) and names & FORMAT_NAMES:
                    found.append(_where(path, node))
            elif isinstance(node, ast.Dict):  # format -> its writer (data keyed by a notation is no choice)
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                writers = [v for v in node.values if isinstance(v, (ast.Name, ast.Attribute, ast.Lambda, ast.Call))]
                if len(keys & FORMAT_NAMES) >= 2 and writers:
                    found.append(_where(path, node))
            elif isinstance(node, ast.Call) and dotted_name(node.func) == "add_argument" and node.args and \
                    isinstance(node.args[0], ast.Constant) and node.args[0].value == "--format":
                if any(k.arg == "choices" and isinstance(k.value, (ast.List, ast.Tuple)) for k in node.keywords):
                    found.append(_where(path, node))
    return found


# --- k. one site formatter ------------------------------------------------------------------

def _site_part(node: ast.AST) -> bool:
    """`site[0]`, `e.site[1]`, `d["site"][2]`, `frame[1]`, a chain's `x[0]`: a part of a recorded frame."""
    if not isinstance(node, ast.Subscript):
        return False
    value = node.value
    name = dotted_name(value) or (value.slice.value if isinstance(value, ast.Subscript)
                                  and isinstance(value.slice, ast.Constant) else None)
    return isinstance(name, str) and (name.endswith("site") or name in ("frame", "fr", "head"))


def site_formatters(root: Path) -> list[str]:
    """'path:line' outside knowledge/sites.py of each f-string that spells out a frame's parts
    ('{site[0]}:{site[1]}'): a second way to name a call site."""
    found = []
    for path, tree in parsed(root).items():
        if path == SITES:
            continue
        for node in nodes(tree):
            if isinstance(node, ast.JoinedStr) and any(
                    isinstance(v, ast.FormattedValue) and any(_site_part(x) for x in ast.walk(v.value))
                    for v in node.values):
                found.append(_where(path, node))
    return found


# --- j. no mixin in lint --------------------------------------------------------------------

def lint_mixins(root: Path) -> list[str]:
    """'path:line: Class(Base)' of each class of collcheck/lint/ built on another class of lint/."""
    trees = {p: t for p, t in parsed(root).items() if p.startswith("collcheck/lint/")}
    classes = {n.name for t in trees.values() for n in nodes(t) if isinstance(n, ast.ClassDef)}
    return [f"{_where(path, node)}: {node.name}({dotted_name(base)})" for path, tree in trees.items()
            for node in nodes(tree) if isinstance(node, ast.ClassDef)
            for base in node.bases if dotted_name(base) in classes]


# --- l. the views never vote ---------------------------------------------------------------

VIEWS = ("collcheck/tui/", "collcheck/report/")


def view_votes(root: Path) -> list[str]:
    """'path:line' of each vote among the ranks in a view (a Counter, `most_common`, a name
    saying majority): which cells are wrong is the analysis' word (analysis/verdicts.py)."""
    found = []
    for path, tree in parsed(root).items():
        if not path.startswith(VIEWS):
            continue
        for node in nodes(tree):
            name = dotted_name(node.func) if isinstance(node, ast.Call) else None
            if name and name.rpartition(".")[2] in ("Counter", "most_common"):
                found.append(_where(path, node))
            elif isinstance(node, (ast.FunctionDef, ast.Name, ast.Attribute)) and "majority" in (
                    getattr(node, "name", None) or getattr(node, "id", None) or getattr(node, "attr", "")).lower():
                found.append(_where(path, node))
    return found


# --- the facts, on this tree --------------------------------------------------------------------

def test_whose_code_a_frame_is_is_decided_in_knowledge_frames_only():
    assert frame_classifiers(ROOT) == []


def test_each_fix_is_phrased_once_in_knowledge_fixes():
    assert fix_copies(ROOT) == []


def test_the_format_is_chosen_in_report_formats_only():
    assert format_dispatches(ROOT) == []


def test_lint_has_no_mixin():
    assert lint_mixins(ROOT) == []


def test_a_call_site_is_named_in_knowledge_sites_only():
    assert site_formatters(ROOT) == []


def test_the_views_mark_what_the_analysis_says_and_never_vote():
    assert view_votes(ROOT) == []


# --- each check keeps a tree that satisfies it and catches one that breaks it ----------------

KNOWLEDGE = {
    FRAMES: 'import re\n_MARKERS = ("/site-packages/", "/dist-packages/")\ndef owner(path):\n    return "user"\n',
    FIXES: '"""How fixes are worded."""\nBY_KIND = {"missing": "make every rank reach the call: move it out of the branch"}\n',
    FORMATS: 'REPORTERS = {"diff": {"text": 1, "json": 2}}\ndef choose(fmt):\n    return fmt == "json"\n',
    "collcheck/cli/diff.py": 'from ..report.formats import formats\ndef add(p):\n'
                             '    p.add_argument("--format", choices=formats("diff"))\n    return p.format\n',
    "collcheck/lint/flow.py": 'class Walker:\n    def __init__(self, ev):\n        self.ev = ev\n',
    "collcheck/analysis/explain.py": 'from ..knowledge import fixes\nTEXT = "every rank reached it: nothing to move"\n',
}


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/model/run.py", "import sysconfig\nDIRS = sysconfig.get_paths()\n", 1),
    ("collcheck/capture/callsite.py", 'from sysconfig import get_paths\n', 1),
    ("collcheck/inputs/flight_recorder/entries.py", 'def lib(p):\n    return "/site-packages/" in p\n', 2),
    ("collcheck/analysis/blame.py", 'STD = "/lib/python3"\n', 1),
], ids=["import", "from-import", "marker", "stdlib-marker"])
def test_the_frame_check_catches_a_second_classifier(tmp_path, module, text, line):
    assert frame_classifiers(write_tree(tmp_path / "ok", KNOWLEDGE)) == []
    assert frame_classifiers(write_tree(tmp_path / "bad", {**KNOWLEDGE, module: text})) == [f"{module}:{line}"]


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/lint/vocabulary.py", 'FIX = "Make every rank reach the call: move it, or else"\n', 1),
    ("collcheck/analysis/explain.py", 'def fix(call):\n    return f"make every rank reach the call: move it {call}"\n', 2),
], ids=["constant", "f-string"])
def test_the_fix_check_catches_a_second_phrasing(tmp_path, module, text, line):
    assert fix_copies(write_tree(tmp_path / "ok", KNOWLEDGE)) == []
    assert fix_copies(write_tree(tmp_path / "bad", {**KNOWLEDGE, module: text})) == [f"{module}:{line}"]


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/cli/stats.py", 'def run(args):\n    if args.format == "json":\n        return 1\n', 2),
    ("collcheck/report/launches.py", 'def pick(fmt):\n    return fmt in ("junit", "xml")\n', 2),
    ("collcheck/report/launches.py", 'FORMATS = {"text": TextLaunches, "json": JsonLaunches}\n', 1),
    ("collcheck/cli/lint.py", 'def add(p):\n    p.add_argument("--format", choices=["text", "sarif"])\n', 2),
], ids=["equals", "in-tuple", "table", "choices"])
def test_the_format_check_catches_a_second_dispatch(tmp_path, module, text, line):
    assert format_dispatches(write_tree(tmp_path / "ok", KNOWLEDGE)) == []
    assert format_dispatches(write_tree(tmp_path / "bad", {**KNOWLEDGE, module: text})) == [f"{module}:{line}"]


def test_the_mixin_check_catches_a_walker_built_on_the_evaluator(tmp_path):
    assert lint_mixins(write_tree(tmp_path / "ok", KNOWLEDGE)) == []
    bad = {**KNOWLEDGE, "collcheck/lint/expressions.py": "class Evaluator:\n    env: dict\n",
           "collcheck/lint/flow.py": "from .expressions import Evaluator\nclass Walker(Evaluator):\n    pass\n"}
    assert lint_mixins(write_tree(tmp_path / "bad", bad)) == ["collcheck/lint/flow.py:2: Walker(Evaluator)"]


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/report/stats.py", 'import os\ndef f(s):\n    return f"{os.path.basename(s.site[0])}:{s.site[1]}"\n', 3),
    ("collcheck/tui/widgets/timeline.py", 'def f(ev):\n    return f" · {ev.site[0]}:{ev.site[1]}"\n', 2),
    ("collcheck/analysis/explain.py", 'def f(d):\n    return f" at {d[\'site\'][0]}"\n', 2),
    ("collcheck/report/show.py", 'def f(fr):\n    return f"{fr[0]}:{fr[1]} in {fr[2]}"\n', 2),
], ids=["basename", "event", "details", "frame"])
def test_the_site_check_catches_a_second_formatter(tmp_path, module, text, line):
    ok = {**KNOWLEDGE, SITES: 'def short(site):\n    return f"{site[0]}:{site[1]}"\n',
          "collcheck/report/text.py": 'from ..knowledge import sites\ndef cell(e):\n    return f"@{sites.short(e.site)}"\n'}
    assert site_formatters(write_tree(tmp_path / "ok", ok)) == []
    assert site_formatters(write_tree(tmp_path / "bad", {**ok, module: text})) == [f"{module}:{line}"]


@pytest.mark.parametrize("module, text, line", [
    ("collcheck/tui/grid.py", "from collections import Counter\ndef f(sigs):\n    return Counter(sigs)\n", 3),
    ("collcheck/tui/grid.py", "def f(votes):\n    return votes.most_common(1)\n", 2),
    ("collcheck/report/text.py", "def majority(sigs):\n    return sigs[0]\n", 1),
], ids=["counter", "most-common", "named"])
def test_the_vote_check_catches_a_view_that_votes(tmp_path, module, text, line):
    ok = {**KNOWLEDGE, "collcheck/tui/grid.py": "def status(verdicts, key, rank):\n    return verdicts[key].cell(rank, True)\n"}
    assert view_votes(write_tree(tmp_path / "ok", ok)) == []
    assert view_votes(write_tree(tmp_path / "bad", {**ok, module: text})) == [f"{module}:{line}"]
