"""The lint's corpus: each program under cases/ says in its comments what `lint_paths` must report.

`# expect: call A` marks the line of finding A's call (inside the rank-dependent region) and
`# expect: branch A` the line of its branch (the `if`/`while`/`for` header, the early-exit `if`, the
decorator); `# expect: chain A` marks a line the finding's chain must pass through (the calls
between it and the collective); `# expect: kind local` says the file's findings are of the per-rank
data kind ("rank" otherwise); `# expect: severity warning` (or `error`) says every finding of the file
has that severity (unchecked without the marker). A case without markers must give no finding. A folder under cases/ is
one case linted as a whole (a main module and the helper module it imports). The cases are read,
never run: they only have to parse.
"""

from __future__ import annotations

import ast
import functools
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from collcheck.lint import lint_paths

CASES = Path(__file__).parent / "cases"
MARKER = re.compile(r"#\s*expect:\s*(call|branch|chain|kind|severity)\s+(\w+)")
KINDS = ("rank", "local")


@dataclass
class Expected:
    """What a case's markers ask for; ids tie a call to its branch and its chain."""
    calls: dict[str, tuple[Path, int]] = field(default_factory=dict)
    branches: dict[str, tuple[Path, int]] = field(default_factory=dict)
    chains: dict[str, list[tuple[Path, int]]] = field(default_factory=dict)
    kinds: dict[Path, str] = field(default_factory=dict)
    severities: dict[Path, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def findings(self) -> set[tuple[Path, int, Path, int]]:
        return {(*self.calls[i], *self.branches[i]) for i in self.calls if i in self.branches}

    def kind_of(self, path: Path) -> str:
        return self.kinds.get(path, "rank")


def _case_names() -> list[str]:
    return sorted(p.name for p in CASES.iterdir()
                  if (p.suffix == ".py" and p.is_file()) or (p.is_dir() and p.name != "__pycache__"))


def _sources(case: Path) -> list[Path]:
    return [case] if case.is_file() else sorted(case.glob("*.py"))


def _markers(path: Path):
    """(what, id, line) of every marker, read from the comments only (never from strings)."""
    with tokenize.open(path) as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type == tokenize.COMMENT:
                for match in MARKER.finditer(token.string):
                    yield match[1], match[2], token.start[0]


def _expected(case: Path) -> Expected:
    expected = Expected()
    for path in (p.resolve() for p in _sources(case)):
        for what, ident, line in _markers(path):
            if what == "kind":
                if ident not in KINDS:
                    expected.problems.append(f"{path.name}:{line}: unknown kind {ident!r}")
                expected.kinds[path] = ident
            elif what == "severity":
                if ident not in ("error", "warning"):
                    expected.problems.append(f"{path.name}:{line}: unknown severity {ident!r}")
                expected.severities[path] = ident
            elif what == "chain":
                expected.chains.setdefault(ident, []).append((path, line))
            else:
                table = expected.calls if what == "call" else expected.branches
                if ident in table:
                    expected.problems.append(f"{path.name}:{line}: a second `{what} {ident}`")
                table[ident] = (path, line)
    for ident in sorted(expected.calls.keys() ^ expected.branches.keys()):
        expected.problems.append(f"id {ident!r} has a call or a branch but not both")
    for ident in sorted(expected.chains.keys() - expected.calls.keys()):
        expected.problems.append(f"chain id {ident!r} has no call")
    return expected


@functools.cache
def _lint(case: Path) -> tuple:
    """The findings of one case (each case is linted once per session: two tests read them)."""
    return tuple(lint_paths([str(case)], learned=()).findings)


def _where(place: tuple[Path, int]) -> str:
    path, line = place
    lines = path.read_text().splitlines() if path.is_file() else []
    text = lines[line - 1].strip() if 0 < line <= len(lines) else "?"
    shown = path.relative_to(CASES.resolve()) if path.is_relative_to(CASES.resolve()) else path
    return f"{shown}:{line} `{text}`"


def _describe(found: set) -> str:
    return "\n".join(f"  call {_where(f[:2])}  under branch {_where(f[2:])}" for f in sorted(found)) or "  (none)"


def test_every_case_is_a_wellformed_program():
    """Each case parses, says in a docstring why it exists, and pairs every call marker with a branch."""
    problems = []
    for name in _case_names():
        case = CASES / name
        problems += [f"{name}: no Python source"] if not _sources(case) else []
        for path in _sources(case):
            tree = ast.parse(path.read_text(), filename=str(path))
            if not ast.get_docstring(tree):
                problems.append(f"{path.name}: no module docstring saying why the case exists")
        problems += [f"{name}: {p}" for p in _expected(case).problems]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", _case_names())
def test_lint_reports_exactly_the_marked_findings(name):
    case = CASES / name
    expected = _expected(case)
    found = _lint(case)
    got = {(Path(f.path).resolve(), f.line, Path(f.branch_path).resolve(), f.branch_line) for f in found}
    want = expected.findings()
    assert got == want, (f"{name}\nmissing:\n{_describe(want - got)}\nunexpected:\n{_describe(got - want)}")
    wrong_kind = [f"{_where((Path(f.path).resolve(), f.line))}: {f.kind!r}, expected "
                  f"{expected.kind_of(Path(f.path).resolve())!r}"
                  for f in found if f.kind != expected.kind_of(Path(f.path).resolve())]
    assert not wrong_kind, "\n".join(wrong_kind)
    wrong_severity = [f"{_where((Path(f.path).resolve(), f.line))}: {f.severity}, expected {want}"
                      for f in found if (want := expected.severities.get(Path(f.path).resolve(), f.severity))
                      != f.severity]
    assert not wrong_severity, "\n".join(wrong_severity)


@pytest.mark.parametrize("name", [n for n in _case_names() if _expected(CASES / n).calls])
def test_each_finding_explains_itself(name):
    """A finding's chain starts at the flagged call and passes every line marked `chain`; fix and why are given."""
    case = CASES / name
    expected = _expected(case)
    by_place = {(Path(f.path).resolve(), f.line): f for f in _lint(case)}
    for ident, call in sorted(expected.calls.items()):
        finding = by_place.get(call)
        if finding is None:
            continue  # test_lint_reports_exactly_the_marked_findings names it
        assert finding.fix.strip() and finding.why.strip(), f"{ident}: empty fix or why"
        chain = [(Path(path).resolve(), line) for path, line, _ in finding.chain]
        assert chain and chain[0] == call, f"{ident}: the chain starts at {chain[:1]}, not at the call {call}"
        missed = [_where(place) for place in expected.chains.get(ident, []) if place not in chain]
        assert not missed, f"{ident}: the chain {[_where(place) for place in chain]} misses {missed}"
