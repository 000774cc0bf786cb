"""The package's shape: one-way layers, no import cycles, one model of a run, no benchmark in
the wheel. Checked from the source (ast), so a lazy import inside a function counts too."""

from __future__ import annotations

import ast
import functools
import shutil
import sys
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("collcheck",)
# The layers, earliest first: a module may import modules of its own layer and of earlier ones.
# Each is a list of folders (packages); the package's two doors are named exactly: `collcheck`
# itself (enable/disable, a recording API) and `collcheck.__main__` (the command line).
# The data flow: the log file's format -> what writes logs (capture in the job, the simulated NCCL
# backend, synthetic runs) -> what reads other inputs (Flight Recorder dumps) -> the model of a run
# -> analysis -> statistics -> reports -> views (TUI, replay) -> command line.
LAYERS = [
    ("base", ["collcheck.base"]),
    ("logfile", ["collcheck.logfile"]),
    ("knowledge", ["collcheck.knowledge"]),
    ("producers", ["collcheck", "collcheck.capture", "collcheck.simnccl", "collcheck.synth"]),
    ("inputs", ["collcheck.inputs"]),
    ("model", ["collcheck.model"]),
    ("lint", ["collcheck.lint"]),
    ("analysis", ["collcheck.analysis"]),
    ("stats", ["collcheck.stats"]),
    ("report", ["collcheck.report"]),
    ("views", ["collcheck.tui", "collcheck.replay"]),
    ("cli", ["collcheck.cli", "collcheck.__main__"]),
]
# what runs inside the training job: the standard library, msgpack and torch, nothing else
IN_JOB = ["collcheck", "collcheck.base", "collcheck.logfile", "collcheck.logfile.format", "collcheck.logfile.ops", "collcheck.logfile.records",
          "collcheck.logfile.checkpoint", "collcheck.logfile.space",
          "collcheck.logfile.writer", "collcheck.knowledge", "collcheck.knowledge.frames",
          "collcheck.knowledge.torch_internals",
          "collcheck.capture", "collcheck.simnccl"]
IN_JOB_THIRD_PARTY = {"torch", "msgpack", "typing_extensions"}  # the last: torch's own, for its frames


def modules(root: Path) -> dict[str, Path]:
    found = {}
    for top in TOPS:
        for f in sorted((root / top).rglob("*.py")):
            name = ".".join(f.relative_to(root).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = f
    return found


@functools.lru_cache(maxsize=None)
def imported(module: str, pkg: str, source: str) -> tuple[str, ...]:
    """Every name `module`'s source imports, made absolute (parsed once per source text: the
    trees the tests below build differ from this one in a single file)."""
    targets: list[str] = []
    for node in ast.walk(ast.parse(source, module)):
        if isinstance(node, ast.Import):
            targets += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets += [base] + [f"{base}.{a.name}" for a in node.names]
    return tuple(targets)


def imports(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> project modules it imports, module -> top-level names of other imports)."""
    mods = modules(root)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    outside: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m if f.name == "__init__.py" else m.rpartition(".")[0]
        for t in imported(m, pkg, f.read_text()):
            if t.split(".")[0] not in TOPS:
                outside[m].add(t.split(".")[0])
                continue
            while t and t not in mods:
                t = t.rpartition(".")[0]
            if t and t != m and not m.startswith(t + "."):  # a package's own __init__ runs first anyway
                edges[m].add(t)
    return edges, outside


def layer(module: str) -> int | None:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            exact_only = p == "collcheck"  # the package root, not everything below it
            if module == p or (not exact_only and module.startswith(p + ".")):
                if best is None or len(p) > best[0]:
                    best = (len(p), rank)
    return None if best is None else best[1]


def violations(root: Path) -> list[str]:
    edges, _ = imports(root)
    out = [f"not in any layer: {m} (add it to LAYERS)" for m in sorted(edges) if layer(m) is None]
    for m in sorted(edges):
        for t in sorted(edges[m]):
            if layer(m) is not None and layer(t) is not None and layer(t) > layer(m):
                out.append(f"backward import: {m} ({LAYERS[layer(m)][0]}) -> {t} ({LAYERS[layer(t)][0]})")
    graph = nx.DiGraph([(m, t) for m, ts in edges.items() for t in ts])
    for scc in sorted(nx.strongly_connected_components(graph), key=sorted):
        if len(scc) > 1:
            cycle = nx.find_cycle(graph.subgraph(scc))
            text = "import cycle: " + " -> ".join([a for a, _ in cycle] + [cycle[0][0]])
            if len(scc) > len(cycle):
                text += f" (entangled with it: {', '.join(sorted(scc - {a for a, _ in cycle}))})"
            out.append(text)
    return out


def test_layers_are_one_way_and_acyclic():
    assert violations(ROOT) == []


def test_code_that_runs_in_the_training_job_imports_only_stdlib_msgpack_and_torch():
    edges, outside = imports(ROOT)
    exact = {"collcheck", "collcheck.logfile", "collcheck.knowledge"}  # the packages themselves, not everything below them
    in_job = [m for m in edges if any(m == p or (p not in exact and m.startswith(p + ".")) for p in IN_JOB)]
    assert "collcheck.capture.recorder" in in_job
    allowed = set(sys.stdlib_module_names) | IN_JOB_THIRD_PARTY
    assert {m: sorted(outside[m] - allowed) for m in in_job if outside[m] - allowed} == {}
    assert {m: sorted(t for t in edges[m] if t not in in_job) for m in in_job if edges[m] - set(in_job)} == {}


def _tree_with(tmp_path: Path, module: str, line: str) -> Path:
    for top in TOPS:
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / module, "a") as f:
        f.write("\n" + line + "\n")
    return tmp_path


@pytest.mark.parametrize("module, line, expected", [
    ("collcheck/model/run.py", "from ..analysis.diff import analyse",
     "backward import: collcheck.model.run (model) -> collcheck.analysis.diff (analysis)"),
    ("collcheck/analysis/diff.py", "def later():\n    from ..cli import main",
     "backward import: collcheck.analysis.diff (analysis) -> collcheck.cli (cli)"),
    ("collcheck/logfile/writer.py", "from .. import report",
     "backward import: collcheck.logfile.writer (logfile) -> collcheck.report (report)"),
    ("collcheck/logfile/writer.py", "from ..capture import recorder", "import cycle: "),
    ("collcheck/logfile/reader.py", "from . import scan", "import cycle: "),
])
def test_the_layer_check_catches_a_backward_import_or_a_cycle(tmp_path, module, line, expected):
    found = violations(_tree_with(tmp_path, module, line))
    assert any(v.startswith(expected) for v in found), found
    if expected == "import cycle: ":
        name = module.removesuffix(".py").replace("/", ".")
        assert any(name in v for v in found if v.startswith(expected)), found


def test_a_module_outside_every_layer_is_reported(tmp_path):
    tree = _tree_with(tmp_path, "collcheck/base/errors.py", "")
    (tree / "collcheck" / "bench_new.py").write_text("import collcheck.cli\n")
    assert "not in any layer: collcheck.bench_new (add it to LAYERS)" in violations(tree)


def test_the_tui_reads_runs_through_the_model_only():
    """No second reader or model of the log in tui/: it builds its views from collcheck.model's
    Run, RankLog and Sequences (slots, channels) and the analysis' report."""
    edges, outside = imports(ROOT)
    tui = [m for m in edges if m == "collcheck.tui" or m.startswith("collcheck.tui.")]
    assert "collcheck.tui.model" not in edges
    reading = {m: sorted(t for t in edges[m] if t.startswith(("collcheck.logfile.scan", "collcheck.logfile.format")))
               for m in tui}
    assert {m: t for m, t in reading.items() if t} == {}
    assert not any("msgpack" in outside[m] for m in tui)
    columns = {"gid", "off", "by_group", "group_events", "sig_map"}  # RankLog's raw columns
    touched = []
    for m in tui:
        for node in ast.walk(ast.parse(modules(ROOT)[m].read_text())):
            if isinstance(node, ast.Attribute) and node.attr in columns:
                touched.append(f"{m}: .{node.attr}")
            if (isinstance(node, ast.Attribute) and node.attr == "sig" and isinstance(node.value, ast.Name)
                    and node.value.id.endswith("log")):
                touched.append(f"{m}: {node.value.id}.sig")
    assert touched == []
