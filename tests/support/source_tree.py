"""The package's source read as syntax trees, for the tests that check where things live
(tests/unit/test_homes.py), and small made-up trees that show each of those checks can fail."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def parsed(root: Path, top: str = "collcheck") -> dict[str, ast.Module]:
    """Every module under root/top, by its path relative to root ('collcheck/logfile/ops.py');
    read once per root (callers only read the trees)."""
    return {f.relative_to(root).as_posix(): ast.parse(f.read_text(), str(f))
            for f in sorted((root / top).rglob("*.py"))}


_NODES: dict[int, tuple[ast.AST, list[ast.AST]]] = {}


def nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of a tree, in ast.walk's order, walked once: the checks walk each module several
    times (the trees of parsed() live as long as its cache, which keeps their ids theirs)."""
    hit = _NODES.get(id(tree))
    if hit is None or hit[0] is not tree:
        hit = _NODES[id(tree)] = (tree, list(ast.walk(tree)))
    return hit[1]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A source tree holding exactly these files (path relative to root -> text)."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def dotted_name(node: ast.AST) -> str | None:
    """The last part of a Name or Attribute (`lf.HEADER` -> 'HEADER'), else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None
