"""Lint on real library trees installed with the test extra: no false error.

Library code is full of rank-conditional code that is correct by construction; these trees are
where a false error would show first. The trees' findings were each read (docs/lint.md, "Real
trees"): the only errors are accelerate's `load_fsdp_model` barrier (a real hazard) and torch's
tests that make one rank time out in a barrier on purpose. A new error here is either a new false
positive (a shape lint does not follow) or a bug in a new release of the library: read it.
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from collcheck.lint import lint_paths

SITE = Path(sysconfig.get_paths()["purelib"])

# tree -> the (file name, function) of each error expected there: read, and true
EXPECTED_ERRORS = {
    "torch/distributed": set(),
    "lightning": set(),
    "accelerate": {("fsdp_utils.py", "load_fsdp_model")},
    "torch/testing/_internal/distributed": {("distributed_test.py", "_test_barrier_timeout"),
                                            ("distributed_test.py", "test_barrier_timeout_arg"),
                                            ("distributed_test.py", "test_monitored_barrier_gloo"),
                                            ("distributed_test.py", "test_monitored_barrier_failure_order"),
                                            ("distributed_test.py", "test_monitored_barrier_wait_all_ranks")},
}


def _function_at(path: str, line: int) -> str:
    """The name of the innermost function whose `def` precedes `line` (indentation-based)."""
    lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[:line]
    for text in reversed(lines):
        stripped = text.lstrip()
        if stripped.startswith(("def ", "async def ")):
            return stripped.split("def ", 1)[1].split("(", 1)[0]
    return "<module>"


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("tree", sorted(EXPECTED_ERRORS))
def test_a_real_tree_has_no_false_error(tree):
    root = SITE / tree
    if not root.is_dir():
        pytest.skip(f"{tree} is not installed")
    result = lint_paths([str(root)], learned=())
    errors = {(Path(f.path).name, _function_at(f.path, f.line)) for f in result.findings if f.certain}
    assert errors == EXPECTED_ERRORS[tree], sorted(errors ^ EXPECTED_ERRORS[tree])
