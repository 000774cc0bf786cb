"""The lint corpus (corpus/, ground truth in corpus/manifest.json): real programs, each confirmed by
running it on 2 gloo ranks (benchmarks/bench_lint_corpus.py --run; tests/integration/
test_bench_lint_corpus.py with -m slow), linted here in-process against the target the lint is
held to in CI: no error on a correct program, every expected finding on a buggy one (its call's
line and its condition's; the call alone where the bug has no condition) and no other error.

A finding's severity is `Finding.severity` where the lint gives one, "error" otherwise (every
finding fails a CI job today). A program the lint does not meet yet has a `lint_gap` in the
manifest, the reason: it runs as a strict xfail, so the improvement that handles its shape
turns it into an unexpected pass, and the gap is then deleted from the manifest.

A buggy program marks its lines with comments: `# @bug` the call, `# @cond` the condition,
`# @origin` where a per-rank argument comes from (no condition); its docstring names them.
"""

from __future__ import annotations

import ast
import json
import re
import tokenize
from pathlib import Path

import pytest

from collcheck.lint import lint_paths

CORPUS = Path(__file__).parent / "corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())["programs"]
MARKER = re.compile(r"#\s*@(\w+)")
TARGET = re.compile(r"expected lint target: ([\w.]+):(\d+) .*?(?:at line (\d+) \(marker @cond\)|"
                    r"from line (\d+) \(marker @origin\)|no condition\.)")


def _script(name: str) -> Path:
    path = CORPUS / name
    return path / "main.py" if path.is_dir() else path


def _markers(path: Path) -> dict[str, int]:
    """`# @name` comments -> their lines (comments only: a docstring that names a marker is not one)."""
    found: dict[str, int] = {}
    with tokenize.open(path) as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type == tokenize.COMMENT and (match := MARKER.search(token.string)):
                assert match[1] not in found, f"{path.name}: a second @{match[1]}"
                found[match[1]] = token.start[0]
    return found


COLD = {"bug_trainer_callback_gather.py", "ok_trainer_callback_barrier_outside.py"}  # read the transformers package
# cold (10-30 s): -m slow


def _param(name: str):
    gap = MANIFEST[name].get("lint_gap")
    marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
    if name in COLD:
        marks.append(pytest.mark.slow)
    return pytest.param(name, id=name, marks=marks)


def _severity(finding) -> str:
    return getattr(finding, "severity", "error")


def _matches(finding, program: Path, expected: dict) -> bool:
    return (Path(finding.path).resolve() == program.resolve() and finding.line == expected["call"]
            and expected["cond"] in (None, finding.branch_line))


def _describe(findings) -> str:
    return "\n".join(f"  {Path(f.path).name}:{f.line} `{f.call}` under line {f.branch_line} `{f.branch}` "
                     f"({_severity(f)}, {f.how})" for f in findings) or "  (none)"


def test_the_corpus_and_its_manifest_agree():
    """Every program is in the manifest and the reverse; at least 20 correct and 20 buggy ones;
    each says why it exists, bounds its hang with CORPUS_TIMEOUT_S, and a buggy one's markers and
    docstring give the manifest's lines (a correct one has no marker); each was run and its outcome
    recorded, 0 for a correct one and a failure for a buggy one."""
    on_disk = {p.name for p in CORPUS.iterdir() if p.name.startswith(("ok_", "bug_"))}
    assert on_disk == set(MANIFEST), on_disk ^ set(MANIFEST)
    truths = [e["truth"] for e in MANIFEST.values()]
    assert truths.count("correct") >= 20 and truths.count("buggy") >= 20, truths
    problems = []
    for name, entry in MANIFEST.items():
        path = _script(name)
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text)) or ""
        problems += [f"{name}: no docstring"] if not doc else []
        problems += [f"{name}: no CORPUS_TIMEOUT_S"] if "CORPUS_TIMEOUT_S" not in text else []
        problems += [f"{name}: truth {entry['truth']!r}"] if entry["truth"] != ("correct" if name.startswith("ok_")
                                                                                 else "buggy") else []
        observed = entry.get("observed") or ""
        if (observed == "exit 0") != (entry["truth"] == "correct"):
            problems.append(f"{name}: observed {observed!r} for a {entry['truth']} program")
        markers = _markers(path)
        if entry["truth"] == "correct":
            problems += [f"{name}: markers {markers} or expected findings in a correct program"] if (
                markers or entry["expect"]) else []
            continue
        (expected,) = entry["expect"]
        wanted = {"bug": expected["call"], **({"cond": expected["cond"]} if expected["cond"] else {}),
                  **({"origin": expected["origin"]} if "origin" in expected else {})}
        problems += [f"{name}: markers {markers}, manifest {wanted}"] if markers != wanted else []
        target = TARGET.search(" ".join(doc.split()))
        said = target and (target[1], int(target[2]), int(target[3] or target[4] or 0) or None)
        if said != (path.name, expected["call"], expected["cond"] or expected.get("origin")):
            problems.append(f"{name}: the docstring's target {said} is not the manifest's {expected}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", [_param(n) for n in sorted(MANIFEST)])
def test_lint_meets_the_target_on_each_corpus_program(name):
    entry, program = MANIFEST[name], _script(name)
    findings = lint_paths([str(CORPUS / name)], learned=()).findings
    errors = [f for f in findings if _severity(f) == "error"]
    if entry["truth"] == "correct":
        assert not errors, f"false alarm on a correct program ({entry['shape']}):\n{_describe(errors)}"
        return
    missing = [e for e in entry["expect"] if not any(_matches(f, program, e) for f in findings)]
    extra = [f for f in errors if not any(_matches(f, program, e) for e in entry["expect"])]
    assert not missing and not extra, (f"{entry['shape']}\nexpected {entry['expect']}, missing {missing}\n"
                                       f"findings:\n{_describe(findings)}")
